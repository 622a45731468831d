/**
 * Account event endpoints and their deliveries as the API shows them (DECISIONS.md "Bounces,
 * complaints and outbound events"), the request bodies, the event payload, and the row mappings.
 */
import { Schema } from "effect"
import { iso } from "../shared/schema.ts"
import { DeliveryAttemptFields, type DeliveryAttemptRow, toDeliveryAttempt, WebhookSecret, WebhookUrl } from "./schema.ts"

const msg = (message: string) => ({ message })

export const EVENT_NAMES = [
  "email.sent",
  "email.failed",
  "email.bounced",
  "email.deferred",
  "email.complained",
  "inbound.message_received",
] as const
export type EventName = typeof EVENT_NAMES[number]
export type OutboundEventName = Exclude<EventName, "inbound.message_received">

/** At least one known event name, each at most once. */
export const EventNames = Schema.Array(Schema.Literals(EVENT_NAMES)).check(
  Schema.isMinLength(1, msg("events must name at least one event")),
  Schema.isUnique(msg("events must not repeat an event")),
)

export const CreateEventEndpointBody = Schema.Struct({
  url: WebhookUrl,
  events: EventNames,
  /** Kept as given (8..256 characters), as for inbox webhooks; generated when omitted. */
  secret: Schema.optional(WebhookSecret),
})
export type CreateEventEndpointBody = typeof CreateEventEndpointBody.Type

export const UpdateEventEndpointBody = Schema.Struct({
  url: Schema.optional(WebhookUrl),
  events: Schema.optional(EventNames),
  is_active: Schema.optional(Schema.Boolean),
})
export type UpdateEventEndpointBody = typeof UpdateEventEndpointBody.Type

export const EventEndpoint = Schema.Struct({
  id: Schema.Int,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  /** Only in the creation answer. */
  secret: Schema.optional(Schema.String),
  is_active: Schema.Boolean,
  created_at: Schema.String,
  updated_at: Schema.String,
})
export type EventEndpoint = typeof EventEndpoint.Type

export const EventDelivery = Schema.Struct({
  id: Schema.Int,
  endpoint_id: Schema.Int,
  event: Schema.String,
  /** The outbound message (email.* events) or the inbound message (inbound.message_received). */
  email_id: Schema.NullOr(Schema.Int),
  message_id: Schema.NullOr(Schema.Int),
  ...DeliveryAttemptFields,
})
export type EventDelivery = typeof EventDelivery.Type

/**
 * What happened to one recipient of an outbound message: the payload of every `email.*` event.
 * `smtp_code` is the status the remote side reported (the enhanced code such as `5.1.1` when
 * there is one, else the basic reply code such as `550`); `diagnostic` its text.
 */
export interface OutboundEvent {
  readonly event: OutboundEventName
  readonly email_id: number
  readonly recipient: string
  /** `sent`, `failed`, `bounced`, `deferred` or `complained`. */
  readonly status: string
  readonly smtp_code: string | null
  readonly diagnostic: string | null
}

export interface EventEndpointRow {
  readonly id: number
  readonly user_id: number
  readonly url: string
  readonly secret_sealed: string
  readonly events: ReadonlyArray<string>
  readonly is_active: boolean
  readonly created_at: Date
  readonly updated_at: Date
}

export interface EventDeliveryRow extends DeliveryAttemptRow {
  readonly id: number
  readonly endpoint_id: number
  readonly event: string
  readonly body: string
  readonly email_id: number | null
  readonly message_id: number | null
}

export const toEventEndpoint = (row: EventEndpointRow, secret?: string): EventEndpoint => ({
  id: row.id,
  url: row.url,
  events: row.events,
  ...(secret !== undefined ? { secret } : {}),
  is_active: row.is_active,
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!,
})

export const toEventDelivery = (row: EventDeliveryRow): EventDelivery => ({
  id: row.id,
  endpoint_id: row.endpoint_id,
  event: row.event,
  email_id: row.email_id,
  message_id: row.message_id,
  ...toDeliveryAttempt(row),
})
