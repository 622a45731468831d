/**
 * Billing models as they cross the API: request bodies (decoded at the edge) and the shapes of
 * `Topup`, ledger entries (`transactions`) and gateway events. Field names are the wire names.
 */
import { Schema } from "effect"
import { iso, Text, TzPhone } from "../shared/schema.ts"

/** SPEC.md: minimum top-up 2,000 TZS. The upper bound keeps amounts far inside bigint and sanity. */
export const MIN_TOPUP_TZS = 2000
export const MAX_TOPUP_TZS = 1_000_000_000

const amountMessage = { message: `amount_tzs must be a whole number of TZS from ${MIN_TOPUP_TZS} to ${MAX_TOPUP_TZS}` }

export const TopupAmount = Schema.Number.check(
  Schema.isInt(amountMessage),
  Schema.isBetween({ minimum: MIN_TOPUP_TZS, maximum: MAX_TOPUP_TZS }, amountMessage),
)

export const TopupRequest = Schema.Struct({ amount_tzs: TopupAmount })
export type TopupRequest = typeof TopupRequest.Type

export const PhoneTopupRequest = Schema.Struct({
  amount_tzs: TopupAmount,
  /** Optional; when given it must be the account's verified phone. */
  phone_number: Schema.optional(TzPhone),
})
export type PhoneTopupRequest = typeof PhoneTopupRequest.Type

/** Whole TZS as stored (int8 normalised to a number by the adapters; a BigInt here is a decode failure). */
const Tzs = Schema.Int

export const TopupStatus = Schema.Literals(["pending", "completed", "failed"])
export type TopupStatus = typeof TopupStatus.Type
export const TopupChannel = Schema.Literals(["checkout", "ussd_push"])
export type TopupChannel = typeof TopupChannel.Type

/** A top-up as stored (`SELECT *` on topups), decoded where it is read. */
export const Topup = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  amount_tzs: Tzs,
  channel: TopupChannel,
  status: TopupStatus,
  reference: Schema.String,
  provider_reference: Schema.NullOr(Schema.String),
  phone_number: Schema.NullOr(Schema.String),
  checkout_url: Schema.NullOr(Schema.String),
  payment_link_url: Schema.NullOr(Schema.String),
  failure_reason: Schema.NullOr(Schema.String),
  expires_at: Schema.Date,
  completed_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
})
export type Topup = typeof Topup.Type

export const LedgerKind = Schema.Literals(["credit", "debit", "refund", "adjustment"])
export type LedgerKind = typeof LedgerKind.Type

/** A ledger entry as stored (`SELECT *` on ledger_entries). */
export const LedgerEntry = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  kind: LedgerKind,
  amount_tzs: Tzs,
  balance_after_tzs: Tzs,
  reference_type: Schema.String,
  reference_id: Schema.NullOr(Schema.String),
  description: Schema.String,
  created_at: Schema.Date,
})
export type LedgerEntry = typeof LedgerEntry.Type

/** A wallet's balance column, the one number every charge is checked against. */
export const BalanceRow = Schema.Struct({ balance_tzs: Tzs })

/** The public `Topup` (SPEC.md fields plus `channel` and `expires_at`). */
export const TopupJson = Schema.Struct({
  id: Schema.Number,
  user_id: Schema.Number,
  amount_tzs: Schema.Number,
  channel: TopupChannel,
  status: TopupStatus,
  provider_reference: Schema.NullOr(Schema.String),
  expires_at: Schema.String,
  completed_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
})
export type TopupJson = typeof TopupJson.Type

export const topupJson = (t: Topup): TopupJson => ({
  id: t.id,
  user_id: t.user_id,
  amount_tzs: t.amount_tzs,
  channel: t.channel,
  status: t.status,
  provider_reference: t.provider_reference,
  expires_at: iso(t.expires_at)!,
  completed_at: iso(t.completed_at),
  created_at: iso(t.created_at)!,
})

export const CheckoutTopupJson = Schema.Struct({
  topup: TopupJson,
  checkout_url: Schema.String,
  payment_link_url: Schema.String,
  provider_reference: Schema.String,
})

export const PhoneTopupJson = Schema.Struct({
  topup: TopupJson,
  provider_reference: Schema.String,
})

export const BalanceJson = Schema.Struct({ balance_tzs: Schema.Number })

/** One ledger entry as `GET /api/billing/transactions` lists it. */
export const TransactionJson = Schema.Struct({
  id: Schema.Number,
  kind: LedgerKind,
  amount_tzs: Schema.Number,
  balance_after_tzs: Schema.Number,
  reference_type: Schema.String,
  reference_id: Schema.NullOr(Schema.String),
  description: Schema.String,
  created_at: Schema.String,
})

export const transactionJson = (e: LedgerEntry): typeof TransactionJson.Type => ({
  id: e.id,
  kind: e.kind,
  amount_tzs: e.amount_tzs,
  balance_after_tzs: e.balance_after_tzs,
  reference_type: e.reference_type,
  reference_id: e.reference_id,
  description: e.description,
  created_at: iso(e.created_at)!,
})

/** The gateway's status event names (SPEC.md "Payment gateway status events"). */
export const PAYMENT_EVENT_NAMES = ["payment.completed", "payment.failed", "payment.expired", "payment.voided"] as const
export type PaymentEventName = typeof PAYMENT_EVENT_NAMES[number]
export const isPaymentEventName = (s: string): s is PaymentEventName => (PAYMENT_EVENT_NAMES as ReadonlyArray<string>).includes(s)

const nonEmpty = (what: string, max: number) =>
  Text.check(
    Schema.isMinLength(1, { message: `${what} must not be empty` }),
    Schema.isMaxLength(max, { message: `${what} must be at most ${max} characters` }),
  )

/**
 * A gateway event body (DECISIONS.md). `event` is any string here: an unknown name is still an
 * event received, recorded and then refused with its own error.
 */
export const PaymentEventBody = Schema.Struct({
  id: nonEmpty("id", 200),
  event: nonEmpty("event", 100),
  provider_reference: nonEmpty("provider_reference", 200),
  amount_tzs: Schema.Number.check(Schema.isInt({ message: "amount_tzs must be a whole number of TZS" })),
  occurred_at: Text.check(
    Schema.makeFilter((s: string) => !Number.isNaN(Date.parse(s)), { message: "occurred_at must be an RFC 3339 date-time" }),
  ),
})
export type PaymentEventBody = typeof PaymentEventBody.Type

/** What became of one received event. */
export type PaymentEventOutcome = "applied" | "ignored" | "duplicate" | "amount_mismatch" | "unknown_reference" | "unknown_event"

export const PaymentEventResultJson = Schema.Struct({
  event_id: Schema.String,
  outcome: Schema.Literals(["applied", "ignored", "duplicate"]),
  topup: TopupJson,
})
