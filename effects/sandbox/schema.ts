/**
 * The sandbox on the wire (DECISIONS.md "Resources"): credentials (SandboxCredential), the
 * account's SMTP settings, and captured messages (CapturedMessage: the inbound message shape
 * plus `recipients` and `size`).
 */
import { Schema } from "effect"
import { type AttachmentMeta, AttachmentSchema, TlsFacts } from "../messages/schema.ts"
import { iso, Text } from "../shared/schema.ts"

/**
 * What a credential may do (`full` = all of them, including scopes added later):
 * - `smtp`: sign in to the sandbox SMTP server and submit mail, which is captured.
 * - `smtp:verify`: sign in only; MAIL FROM is refused (550 5.7.1) and nothing is captured, so a
 *   health check of an app's mail settings does not use up the monthly allowance.
 * The account's own SMTP username/password always acts with `full`.
 */
export const SANDBOX_SCOPES = ["smtp", "smtp:verify"] as const
export type SandboxScope = typeof SANDBOX_SCOPES[number]

export const CreateSandboxCredentialBody = Schema.Struct({
  /** `full` (default) or a comma list of sandbox scopes; checked by the service. */
  scopes: Schema.optional(Text.check(Schema.isMaxLength(200, { message: "must be at most 200 characters" }))),
})
export type CreateSandboxCredentialBody = typeof CreateSandboxCredentialBody.Type

export const SandboxCredentialStatus = Schema.Literals(["active", "revoked"])

export const SandboxCredential = Schema.Struct({
  id: Schema.Int,
  client_id: Schema.String,
  client_secret_prefix: Schema.String,
  scopes: Schema.String,
  status: SandboxCredentialStatus,
  revoked_at: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
})
export type SandboxCredential = typeof SandboxCredential.Type

/** The creation answer: the only time `client_secret` is shown. */
export const CreatedSandboxCredential = Schema.Struct({
  id: Schema.Int,
  client_id: Schema.String,
  client_secret: Schema.String,
  client_secret_prefix: Schema.String,
  scopes: Schema.String,
  status: SandboxCredentialStatus,
  created_at: Schema.String,
})
export type CreatedSandboxCredential = typeof CreatedSandboxCredential.Type

export const SandboxSmtpSettings = Schema.Struct({
  host: Schema.String,
  port: Schema.Int,
  username: Schema.String,
  /** Only when newly generated (the first read, and regenerate). */
  password: Schema.optional(Schema.String),
})
export type SandboxSmtpSettings = typeof SandboxSmtpSettings.Type

export const CapturedMessage = Schema.Struct({
  id: Schema.Int,
  from_addr: Schema.String,
  /** The first envelope recipient. */
  to_addr: Schema.String,
  /** Every envelope recipient, in RCPT order. */
  recipients: Schema.Array(Schema.String),
  subject: Schema.String,
  text_body: Schema.String,
  html_body: Schema.String,
  headers: Schema.Record(Schema.String, Schema.Unknown),
  /** Lists carry the metadata; GET /api/sandbox/messages/{id} adds `content` (base64). */
  attachments: Schema.Array(AttachmentSchema),
  /** Bytes of the message as submitted. */
  size: Schema.Int,
  received_at: Schema.String,
  /** The submitting session's TLS (STARTTLS or the SMTPS port), or null in plaintext. */
  tls: Schema.NullOr(TlsFacts),
})
export type CapturedMessage = typeof CapturedMessage.Type

export const SandboxUsage = Schema.Struct({
  /** The calendar month (UTC) counted, `YYYY-MM`. */
  month: Schema.String,
  captured: Schema.Int,
  limit: Schema.Int,
  remaining: Schema.Int,
})
export type SandboxUsage = typeof SandboxUsage.Type

export const ClearedCapturedMessages = Schema.Struct({ deleted_count: Schema.Int })

export interface SandboxCredentialRow {
  readonly id: number
  readonly user_id: number
  readonly client_id: string
  readonly client_secret_prefix: string
  readonly scopes: string
  readonly last_used_at: Date | null
  readonly revoked_at: Date | null
  readonly created_at: Date
}

export const CREDENTIAL_COLUMNS = "id, user_id, client_id, client_secret_prefix, scopes, last_used_at, revoked_at, created_at"

export const toSandboxCredential = (row: SandboxCredentialRow): SandboxCredential => ({
  id: row.id,
  client_id: row.client_id,
  client_secret_prefix: row.client_secret_prefix,
  scopes: row.scopes,
  status: row.revoked_at ? "revoked" : "active",
  revoked_at: iso(row.revoked_at),
  last_used_at: iso(row.last_used_at),
  created_at: iso(row.created_at)!,
})

export interface CapturedMessageRow {
  readonly id: number
  readonly user_id: number
  readonly from_addr: string
  readonly to_addr: string
  readonly recipients: ReadonlyArray<string>
  readonly subject: string
  readonly text_body: string
  readonly html_body: string
  readonly headers: Record<string, unknown>
  readonly attachments: ReadonlyArray<AttachmentMeta>
  readonly size: number
  readonly received_at: Date
  readonly tls: TlsFacts | null
}

/** Every column a read needs (never `raw`). */
export const CAPTURED_COLUMNS =
  "id, user_id, from_addr, to_addr, recipients, subject, text_body, html_body, headers, attachments, size, received_at, tls"

export const toCapturedMessage = (
  row: CapturedMessageRow,
  attachments?: ReadonlyArray<AttachmentMeta & { readonly content: string }>,
): CapturedMessage => ({
  id: row.id,
  from_addr: row.from_addr,
  to_addr: row.to_addr,
  recipients: row.recipients ?? [],
  subject: row.subject,
  text_body: row.text_body,
  html_body: row.html_body,
  headers: row.headers ?? {},
  attachments: attachments ?? row.attachments ?? [],
  size: row.size,
  received_at: iso(row.received_at)!,
  tls: row.tls ?? null,
})
