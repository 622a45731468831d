/** The ComplianceProfile (SPEC.md) and the audit export (DECISIONS.md), as the API shows them. */
import { Schema } from "effect"
import { iso, MultilineText, Text } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

/** A real calendar date written YYYY-MM-DD (2024-02-30 is refused). */
export const isCalendarDate = (s: string): boolean => {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s)
  if (!m) return false
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])))
  return d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3])
}

const CalendarDate = Text.check(
  Schema.makeFilter((s: string) => isCalendarDate(s), msg("Expected a date written YYYY-MM-DD")),
)

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i
const DateTimeString = Text.check(
  Schema.makeFilter(
    (s: string) => RFC3339.test(s) && isCalendarDate(s.slice(0, 10)) && !Number.isNaN(Date.parse(s)),
    msg("Expected an RFC 3339 date-time such as 2026-01-31T09:00:00Z"),
  ),
)

export const RetentionDays = Schema.Int.check(
  Schema.isBetween({ minimum: 1, maximum: 3650 }, msg("default_retention_days must be an integer from 1 to 3650")),
)

/** Free text of the profile: it may span lines (a registration note pasted from a letter). */
const ShortText = (max: number, what: string) =>
  MultilineText.check(
    Schema.isMinLength(1, msg(`${what} must not be empty`)),
    Schema.isMaxLength(max, msg(`${what} must be at most ${max} characters`)),
  )

/** PATCH body: every field optional; `null` clears the nullable ones. */
export const ComplianceProfilePatch = Schema.Struct({
  pdpc_registered: Schema.optional(Schema.Boolean),
  pdpc_certificate_number: Schema.optional(Schema.NullOr(ShortText(100, "pdpc_certificate_number"))),
  pdpc_registered_at: Schema.optional(Schema.NullOr(CalendarDate)),
  default_retention_days: Schema.optional(RetentionDays),
  data_consent_at: Schema.optional(Schema.NullOr(DateTimeString)),
  privacy_policy_version: Schema.optional(Schema.NullOr(ShortText(50, "privacy_policy_version"))),
})
export type ComplianceProfilePatch = typeof ComplianceProfilePatch.Type

export const ComplianceProfile = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  pdpc_registered: Schema.Boolean,
  pdpc_certificate_number: Schema.NullOr(Schema.String),
  pdpc_registered_at: Schema.NullOr(Schema.String),
  default_retention_days: Schema.Int,
  data_consent_at: Schema.NullOr(Schema.String),
  privacy_policy_version: Schema.NullOr(Schema.String),
  updated_at: Schema.String,
})
export type ComplianceProfile = typeof ComplianceProfile.Type

export const AuditExport = Schema.Struct({
  account_id: Schema.Int,
  pdpc_registered: Schema.Boolean,
  pdpc_certificate_number: Schema.NullOr(Schema.String),
  pdpc_registered_at: Schema.NullOr(Schema.String),
  default_retention_days: Schema.Int,
  address_count: Schema.Int,
  message_count: Schema.Int,
  generated_at: Schema.String,
})
export type AuditExport = typeof AuditExport.Type

export interface ComplianceProfileRow {
  readonly id: number
  readonly user_id: number
  readonly pdpc_registered: boolean
  readonly pdpc_certificate_number: string | null
  readonly pdpc_registered_at: string | null
  readonly default_retention_days: number
  readonly data_consent_at: Date | null
  readonly privacy_policy_version: string | null
  readonly updated_at: Date
}

export const toComplianceProfile = (r: ComplianceProfileRow): ComplianceProfile => ({
  id: r.id,
  user_id: r.user_id,
  pdpc_registered: r.pdpc_registered,
  pdpc_certificate_number: r.pdpc_certificate_number,
  pdpc_registered_at: r.pdpc_registered_at,
  default_retention_days: r.default_retention_days,
  data_consent_at: iso(r.data_consent_at),
  privacy_policy_version: r.privacy_policy_version,
  updated_at: iso(r.updated_at)!,
})
