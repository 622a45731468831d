/**
 * SMS notification rules and their deliveries as the API shows them (DECISIONS.md "Resources":
 * SMS rule, Delivery), the creation body, and the mapping from their rows.
 */
import { Schema } from "effect"
import { Id, iso, Text, TzPhone } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

export const CreateSmsRuleBody = Schema.Struct({
  address_id: Id,
  phone_number: TzPhone,
  /** The account's own key for the SMS provider; shown once, stored sealed. */
  provider_key: Text.check(
    Schema.isMinLength(8, msg("provider_key must be 8 to 512 characters")),
    Schema.isMaxLength(512, msg("provider_key must be 8 to 512 characters")),
    Schema.isPattern(/^\S+$/, msg("provider_key must not contain whitespace")),
  ),
})
export type CreateSmsRuleBody = typeof CreateSmsRuleBody.Type

export const SmsRule = Schema.Struct({
  id: Schema.Int,
  address_id: Schema.Int,
  phone_number: Schema.String,
  /** Only in the creation answer. */
  provider_key: Schema.optional(Schema.String),
  provider_key_prefix: Schema.String,
  is_active: Schema.Boolean,
  revoked_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
})
export type SmsRule = typeof SmsRule.Type

export const SmsDeliveryStatus = Schema.Literals(["pending", "sent", "failed"])
export type SmsDeliveryStatus = typeof SmsDeliveryStatus.Type

export const SmsDelivery = Schema.Struct({
  id: Schema.Int,
  rule_id: Schema.Int,
  message_id: Schema.Int,
  status: SmsDeliveryStatus,
  attempt: Schema.Int,
  provider_message_id: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  sent_at: Schema.NullOr(Schema.String),
})
export type SmsDelivery = typeof SmsDelivery.Type

export interface SmsRuleRow {
  readonly id: number
  readonly user_id: number
  readonly address_id: number
  readonly phone_number: string
  readonly provider_key_sealed: string
  readonly provider_key_prefix: string
  readonly is_active: boolean
  readonly revoked_at: Date | null
  readonly created_at: Date
}

export interface SmsDeliveryRow {
  readonly id: number
  readonly rule_id: number
  readonly message_id: number
  readonly status: SmsDeliveryStatus
  readonly attempt: number
  readonly body: string
  readonly provider_message_id: string | null
  readonly last_error: string | null
  readonly next_attempt_at: Date | null
  readonly locked_until: Date | null
  readonly created_at: Date
  readonly sent_at: Date | null
}

/** Enough to recognise a key in a list, too little to use it. */
export const keyPrefix = (key: string): string => key.slice(0, Math.min(8, Math.floor(key.length / 3)))

export const toSmsRule = (row: SmsRuleRow, providerKey?: string): SmsRule => ({
  id: row.id,
  address_id: row.address_id,
  phone_number: row.phone_number,
  ...(providerKey !== undefined ? { provider_key: providerKey } : {}),
  provider_key_prefix: row.provider_key_prefix,
  is_active: row.is_active,
  revoked_at: iso(row.revoked_at),
  created_at: iso(row.created_at)!,
})

export const toSmsDelivery = (row: SmsDeliveryRow): SmsDelivery => ({
  id: row.id,
  rule_id: row.rule_id,
  message_id: row.message_id,
  status: row.status,
  attempt: row.attempt,
  provider_message_id: row.provider_message_id,
  last_error: row.last_error,
  created_at: iso(row.created_at)!,
  sent_at: iso(row.sent_at),
})
