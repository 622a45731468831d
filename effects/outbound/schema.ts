/**
 * OutboundMessage as the API shows it (SPEC.md "OutboundMessage", the detail's recipients per
 * DECISIONS.md "Resources"), the send and batch request bodies, and the row mappings.
 */
import { Schema } from "effect"
import { Id, iso, MAX_SUBJECT_CHARS, MultilineText, Text, TextMap } from "../shared/schema.ts"
import { isBase64 } from "./attachments.ts"
import { isRecipient } from "./recipients.ts"
import { pageBodyColumns } from "../shared/heavy-pages.ts"

const msg = (message: string) => ({ message })

/** Optional fields also take `null` (many client libraries send it for "not set"). */
const opt = <S extends Schema.Top>(schema: S) => Schema.optionalKey(Schema.NullOr(schema))

export const Recipient = Text.check(
  Schema.makeFilter((s: string) => isRecipient(s), msg("Expected an email address: addr@domain or Name <addr@domain>")),
)
export const Subject = Text.check(
  Schema.isMaxLength(MAX_SUBJECT_CHARS, msg(`subject must be at most ${MAX_SUBJECT_CHARS} characters`)),
  Schema.isPattern(/^[^\r\n]*$/, msg("subject must be a single line")),
)

export const AttachmentInput = Schema.Struct({
  filename: Text.check(
    Schema.isMinLength(1, msg("filename is required")),
    Schema.isMaxLength(255, msg("filename must be at most 255 characters")),
    Schema.isPattern(/^[^\u0000-\u001f\u007f/\\]*$/, msg("filename must not contain slashes or control characters")),
  ),
  content_type: Text.check(
    Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/, msg("Expected a media type such as application/pdf")),
  ),
  size: opt(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0, msg("size must be >= 0")))),
  // Base64 may come wrapped in lines (MIME style).
  data_base64: MultilineText.check(Schema.makeFilter((s: string) => isBase64(s), msg("Expected standard base64 content"))),
})

/** The content fields shared by single and batch sends. */
const content = {
  subject: opt(Subject),
  html_body: opt(MultilineText),
  text_body: opt(MultilineText),
  attachments: opt(Schema.Array(AttachmentInput)),
  template_id: opt(Id),
  // Values may fill a body, so they may span lines; a key is a name.
  variables: opt(TextMap),
  from_domain_id: opt(Id),
  from_address: opt(Text),
}

export const SendEmailBody = Schema.Struct({
  to: opt(Schema.Array(Recipient)),
  cc: opt(Schema.Array(Recipient)),
  bcc: opt(Schema.Array(Recipient)),
  ...content,
})
export type SendEmailBody = typeof SendEmailBody.Type

export const BatchEmailBody = Schema.Struct({
  to: Schema.Array(Recipient),
  /** Refused when present: every batch recipient gets a message of their own. */
  cc: Schema.optional(Schema.Unknown),
  bcc: Schema.optional(Schema.Unknown),
  ...content,
})
export type BatchEmailBody = typeof BatchEmailBody.Type

export const MessageStatus = Schema.Literals(["queued", "sent", "failed"])
export type MessageStatus = typeof MessageStatus.Type

export const OutboundMessage = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  from_address: Schema.String,
  to_addresses: Schema.Array(Schema.String),
  cc_addresses: Schema.Array(Schema.String),
  bcc_addresses: Schema.Array(Schema.String),
  subject: Schema.String,
  html_body: Schema.String,
  text_body: Schema.String,
  /** `sent` = accepted by the provider; `queued` only while the dispatch is under way. */
  status: MessageStatus,
  error_code: Schema.NullOr(Schema.String),
  provider_message_id: Schema.NullOr(Schema.String),
  /** Net TZS charged: 5 per recipient the provider accepted. */
  amount_tzs: Schema.Int,
  created_at: Schema.String,
})
export type OutboundMessage = typeof OutboundMessage.Type

export const FeedbackType = Schema.Literals(["bounced", "deferred", "complained"])
export type FeedbackType = typeof FeedbackType.Type

/**
 * What the recipient's side reported after the relay took the message: a bounce (5.x.x), a
 * delay (4.x.x) or a complaint (an ARF report). `smtp_code` is the reported status (`5.1.1`, or a
 * basic reply code such as `550`; null for complaints), `diagnostic` its text.
 */
export const Feedback = Schema.Struct({
  type: FeedbackType,
  smtp_code: Schema.NullOr(Schema.String),
  diagnostic: Schema.NullOr(Schema.String),
  at: Schema.String,
})
export type Feedback = typeof Feedback.Type

export const OutboundRecipient = Schema.Struct({
  email: Schema.String,
  kind: Schema.Literals(["to", "cc", "bcc"]),
  status: MessageStatus,
  /** `suppressed`, `rejected` (the provider refused it) or `provider_error`; null when sent. */
  error: Schema.NullOr(Schema.String),
  provider_code: Schema.NullOr(Schema.Int),
  provider_message_id: Schema.NullOr(Schema.String),
  /** Null until a bounce, delay notice or complaint about this recipient came back. */
  feedback: Schema.NullOr(Feedback),
  created_at: Schema.String,
  updated_at: Schema.String,
})
export type OutboundRecipient = typeof OutboundRecipient.Type

export const OutboundMessageDetail = Schema.Struct({ ...OutboundMessage.fields, recipients: Schema.Array(OutboundRecipient) })
export type OutboundMessageDetail = typeof OutboundMessageDetail.Type

/** One message of a batch: who it went to and how it ended (the full message: GET /emails/{id}). */
export const BatchMessage = Schema.Struct({
  id: Schema.Int,
  to: Schema.String,
  status: MessageStatus,
  error_code: Schema.NullOr(Schema.String),
  provider_message_id: Schema.NullOr(Schema.String),
  amount_tzs: Schema.Int,
  created_at: Schema.String,
})
export type BatchMessage = typeof BatchMessage.Type

export const BatchResult = Schema.Struct({
  /** Messages created: one per recipient left after de-duplication and suppression. */
  total: Schema.Int,
  sent: Schema.Int,
  failed: Schema.Int,
  /** Recipients left out because they are on the suppression list (not charged). */
  suppressed: Schema.Array(Schema.String),
  messages: Schema.Array(BatchMessage),
})
export type BatchResult = typeof BatchResult.Type

export const Suppression = Schema.Struct({
  email: Schema.String,
  reason: Schema.String,
  provider_code: Schema.NullOr(Schema.Int),
  message_id: Schema.NullOr(Schema.Int),
  created_at: Schema.String,
})
export type Suppression = typeof Suppression.Type

// ---- rows -----------------------------------------------------------------------------------

export interface OutboundMessageRow {
  readonly id: number
  readonly user_id: number
  readonly content_id: number
  readonly from_address: string
  readonly domain_id: number | null
  readonly message_id_header: string
  readonly to_addresses: ReadonlyArray<string>
  readonly cc_addresses: ReadonlyArray<string>
  readonly bcc_addresses: ReadonlyArray<string>
  readonly status: MessageStatus
  readonly error_code: string | null
  readonly provider_message_id: string | null
  readonly amount_tzs: number
  readonly attempts: number
  readonly locked_until: Date | null
  readonly created_at: Date
  readonly updated_at: Date
  /** Joined from outbound_contents. */
  readonly subject: string
  readonly html_body: string
  readonly text_body: string
}

export interface OutboundRecipientRow {
  readonly id: number
  readonly message_id: number
  readonly email: string
  readonly name: string | null
  readonly kind: "to" | "cc" | "bcc"
  readonly status: MessageStatus
  readonly error: string | null
  readonly provider_code: number | null
  readonly provider_message_id: string | null
  readonly charged: boolean
  readonly feedback_type: FeedbackType | null
  readonly feedback_smtp_code: string | null
  readonly feedback_diagnostic: string | null
  readonly feedback_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

/** Messages with their content; `WHERE`/`ORDER BY` follow. */
export const MESSAGE_SELECT = `SELECT m.*, c.subject, c.html_body, c.text_body
  FROM outbound_messages m JOIN outbound_contents c ON c.id = m.content_id`

/** MESSAGE_SELECT for a list page: a large message's bodies left out (../shared/heavy-pages.ts). */
export const PAGE_SELECT = `SELECT m.*, c.subject, ${pageBodyColumns("c.text_body", "c.html_body")}
  FROM outbound_messages m JOIN outbound_contents c ON c.id = m.content_id`

export const toOutboundMessage = (row: OutboundMessageRow): OutboundMessage => ({
  id: row.id,
  user_id: row.user_id,
  from_address: row.from_address,
  to_addresses: row.to_addresses,
  cc_addresses: row.cc_addresses,
  bcc_addresses: row.bcc_addresses,
  subject: row.subject,
  html_body: row.html_body,
  text_body: row.text_body,
  status: row.status,
  error_code: row.error_code,
  provider_message_id: row.provider_message_id,
  amount_tzs: row.amount_tzs,
  created_at: iso(row.created_at)!,
})

export const toOutboundRecipient = (row: OutboundRecipientRow): OutboundRecipient => ({
  email: row.email,
  kind: row.kind,
  status: row.status,
  error: row.error,
  provider_code: row.provider_code,
  provider_message_id: row.provider_message_id,
  feedback: row.feedback_type === null || row.feedback_type === undefined ? null : {
    type: row.feedback_type,
    smtp_code: row.feedback_smtp_code,
    diagnostic: row.feedback_diagnostic,
    at: iso(row.feedback_at)!,
  },
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!,
})

export const toBatchResult = (rows: ReadonlyArray<OutboundMessageRow>, suppressed: ReadonlyArray<string>): BatchResult => ({
  total: rows.length,
  sent: rows.filter((r) => r.status === "sent").length,
  failed: rows.filter((r) => r.status === "failed").length,
  suppressed,
  messages: rows.map((r) => ({
    id: r.id,
    to: r.to_addresses[0] ?? "",
    status: r.status,
    error_code: r.error_code,
    provider_message_id: r.provider_message_id,
    amount_tzs: r.amount_tzs,
    created_at: iso(r.created_at)!,
  })),
})

export interface SuppressionRow {
  readonly user_id: number
  readonly email: string
  readonly reason: string
  readonly provider_code: number | null
  readonly message_id: number | null
  readonly created_at: Date
}

export const toSuppression = (row: SuppressionRow): Suppression => ({
  email: row.email,
  reason: row.reason,
  provider_code: row.provider_code,
  message_id: row.message_id,
  created_at: iso(row.created_at)!,
})
