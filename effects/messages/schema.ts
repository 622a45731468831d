/** InboundMessage as the API shows it (SPEC.md fields; attachments per DECISIONS.md). */
import { Schema } from "effect"
import { IdFromString, iso, PageQuery } from "../shared/schema.ts"
import { BLOB_TEXT_COLUMNS, type BlobTextRow } from "./blob-text.ts"

export const AttachmentSchema = Schema.Struct({
  filename: Schema.String,
  content_type: Schema.String,
  size: Schema.Int,
  /** Content-ID of an inline part (referenced as `cid:` in html_body), else null. */
  content_id: Schema.NullOr(Schema.String),
  /** Base64; in GET /messages/{id} only (lists carry the metadata). */
  content: Schema.optional(Schema.String),
})

/** The TLS of the SMTP session a message came in on (DECISIONS.md "TLS on the SMTP servers"). */
export const TlsFacts = Schema.Struct({
  /** e.g. `TLSv1.3`. */
  protocol: Schema.String,
  /** The negotiated cipher suite, e.g. `TLS_AES_256_GCM_SHA384`. */
  cipher: Schema.String,
})
export type TlsFacts = typeof TlsFacts.Type

export const InboundMessage = Schema.Struct({
  id: Schema.Int,
  address_id: Schema.Int,
  from_addr: Schema.String,
  to_addr: Schema.String,
  subject: Schema.String,
  text_body: Schema.String,
  html_body: Schema.String,
  headers: Schema.Record(Schema.String, Schema.Unknown),
  attachments: Schema.Array(AttachmentSchema),
  is_read: Schema.Boolean,
  received_at: Schema.String,
  /** The session's TLS, or null when the message came in plaintext. */
  tls: Schema.NullOr(TlsFacts),
  /** SPF, DKIM, DMARC and ARC verdicts at receipt; in GET /messages/{id} only. */
  auth_results: Schema.optional(Schema.Unknown),
})
export type InboundMessage = typeof InboundMessage.Type

const TrueOrFalse = Schema.Literals(["true", "false"])

export const MessageListQuery = Schema.Struct({
  address_id: IdFromString,
  unread: Schema.optional(TrueOrFalse),
  // The paging rule of every list, bounds included.
  ...PageQuery.fields,
})
export type MessageListQuery = typeof MessageListQuery.Type

export interface AttachmentMeta {
  readonly filename: string
  readonly content_type: string
  readonly size: number
  readonly content_id: string | null
}

/** A stored row, as read for the API (never `raw` or attachment bytes). */
export interface InboundMessageRow extends BlobTextRow {
  readonly id: number
  readonly address_id: number
  readonly user_id: number
  readonly mime_id: number | null
  readonly from_addr: string
  readonly to_addr: string
  readonly subject: string
  readonly text_body: string
  readonly html_body: string
  readonly headers: Record<string, unknown>
  readonly attachments: ReadonlyArray<AttachmentMeta>
  readonly auth_results: unknown
  readonly tls: TlsFacts | null
  readonly is_read: boolean
  readonly received_at: Date
}

/**
 * The columns every read selects (the bodies included, the MIME bytes not; a text kept in the
 * body's file is read from there: ./blob-text.ts).
 */
export const MESSAGE_COLUMNS =
  `id, address_id, user_id, mime_id, from_addr, to_addr, subject, text_body, html_body, headers, attachments, auth_results, tls, is_read, received_at, ${BLOB_TEXT_COLUMNS}`

export const toInboundMessage = (
  row: InboundMessageRow,
  detail?: { readonly attachments: ReadonlyArray<AttachmentMeta & { readonly content: string }> },
): InboundMessage => ({
  id: row.id,
  address_id: row.address_id,
  from_addr: row.from_addr,
  to_addr: row.to_addr,
  subject: row.subject,
  text_body: row.text_body,
  html_body: row.html_body,
  headers: row.headers ?? {},
  attachments: detail ? detail.attachments : (row.attachments ?? []),
  is_read: row.is_read,
  received_at: iso(row.received_at)!,
  tls: row.tls ?? null,
  ...(detail ? { auth_results: row.auth_results ?? {} } : {}),
})
