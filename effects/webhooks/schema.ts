/**
 * Webhook and WebhookDelivery as the API shows them (SPEC.md "Webhook", "WebhookDelivery"),
 * the request bodies, and the mapping from their rows.
 */
import { Schema } from "effect"
import { Id, iso, Text } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

/** http/https, at most 2048 characters; the full rule (credentials, private targets) is in url.ts. */
export const WebhookUrl = Text.check(
  Schema.isMinLength(1, msg("url is required")),
  Schema.isMaxLength(2048, msg("url must be at most 2048 characters")),
)

/** A secret given at creation is kept as given. */
export const WebhookSecret = Text.check(
  Schema.isMinLength(8, msg("secret must be 8 to 256 characters")),
  Schema.isMaxLength(256, msg("secret must be 8 to 256 characters")),
)

export const CreateWebhookBody = Schema.Struct({
  address_id: Id,
  url: WebhookUrl,
  secret: Schema.optional(WebhookSecret),
})
export type CreateWebhookBody = typeof CreateWebhookBody.Type

export const UpdateWebhookBody = Schema.Struct({
  is_active: Schema.optional(Schema.Boolean),
  url: Schema.optional(WebhookUrl),
})
export type UpdateWebhookBody = typeof UpdateWebhookBody.Type

export const Webhook = Schema.Struct({
  id: Schema.Int,
  address_id: Schema.Int,
  url: Schema.String,
  /** Only in the creation answer. */
  secret: Schema.optional(Schema.String),
  is_active: Schema.Boolean,
  created_at: Schema.String,
})
export type Webhook = typeof Webhook.Type

export const DeliveryStatus = Schema.Literals(["pending", "retrying", "delivered", "failed"])
export type DeliveryStatus = typeof DeliveryStatus.Type

/** How far an HTTP delivery (inbox webhook or event endpoint) got, as the API shows it. */
export const DeliveryAttemptFields = {
  status_code: Schema.NullOr(Schema.Int),
  attempt: Schema.Int,
  delivered_at: Schema.NullOr(Schema.String),
  status: DeliveryStatus,
  next_retry_at: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String),
  created_at: Schema.String,
}

export const WebhookDelivery = Schema.Struct({
  id: Schema.Int,
  webhook_id: Schema.Int,
  message_id: Schema.Int,
  event: Schema.String,
  ...DeliveryAttemptFields,
})
export type WebhookDelivery = typeof WebhookDelivery.Type

/** What `POST /webhooks/{id}/test` answers: the outcome of one immediate attempt. */
export const WebhookTestResult = Schema.Struct({
  webhook_id: Schema.Int,
  event: Schema.String,
  delivered: Schema.Boolean,
  status_code: Schema.NullOr(Schema.Int),
  error: Schema.NullOr(Schema.String),
  duration_ms: Schema.Number,
})
export type WebhookTestResult = typeof WebhookTestResult.Type

export interface WebhookRow {
  readonly id: number
  readonly user_id: number
  readonly address_id: number
  readonly url: string
  readonly secret_sealed: string
  readonly is_active: boolean
  readonly created_at: Date
  readonly updated_at: Date
}

/** The attempt columns both HTTP delivery tables (webhook_deliveries, event_deliveries) have. */
export interface DeliveryAttemptRow {
  readonly status: DeliveryStatus
  readonly attempt: number
  readonly status_code: number | null
  readonly last_error: string | null
  readonly next_attempt_at: Date | null
  readonly locked_until: Date | null
  readonly delivered_at: Date | null
  readonly created_at: Date
}

export interface WebhookDeliveryRow extends DeliveryAttemptRow {
  readonly id: number
  readonly webhook_id: number
  readonly message_id: number
  readonly event: string
}

export const toWebhook = (row: WebhookRow, secret?: string): Webhook => ({
  id: row.id,
  address_id: row.address_id,
  url: row.url,
  ...(secret !== undefined ? { secret } : {}),
  is_active: row.is_active,
  created_at: iso(row.created_at)!,
})

export const toDeliveryAttempt = (row: DeliveryAttemptRow) => ({
  status_code: row.status_code,
  attempt: row.attempt,
  delivered_at: iso(row.delivered_at),
  status: row.status,
  // Public only while a retry is scheduled; a fresh row's due time is "now".
  next_retry_at: row.status === "retrying" ? iso(row.next_attempt_at) : null,
  last_error: row.last_error,
  created_at: iso(row.created_at)!,
})

export const toWebhookDelivery = (row: WebhookDeliveryRow): WebhookDelivery => ({
  id: row.id,
  webhook_id: row.webhook_id,
  message_id: row.message_id,
  event: row.event,
  ...toDeliveryAttempt(row),
})
