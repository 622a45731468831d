/** InboundAddress as the API shows it (SPEC.md fields plus `email`, the full address). */
import { Schema } from "effect"
import { Id, iso, LocalPart, Text } from "../shared/schema.ts"

export const CreateInboundAddress = Schema.Struct({
  local_part: LocalPart,
  label: Schema.optional(
    Schema.NullOr(
      Text.check(
        Schema.isMinLength(1, { message: "label must not be empty" }),
        Schema.isMaxLength(200, { message: "label must be at most 200 characters" }),
      ),
    ),
  ),
  domain_id: Schema.optional(Schema.NullOr(Id)),
})
export type CreateInboundAddress = typeof CreateInboundAddress.Type

export const InboundAddress = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  local_part: Schema.String,
  label: Schema.NullOr(Schema.String),
  domain_id: Schema.NullOr(Schema.Int),
  email: Schema.String,
  retention_days: Schema.Int,
  created_at: Schema.String,
})
export type InboundAddress = typeof InboundAddress.Type

export interface InboundAddressRow {
  readonly id: number
  readonly user_id: number
  readonly local_part: string
  readonly label: string | null
  readonly domain_id: number | null
  readonly retention_days: number
  readonly created_at: Date
  /** Joined from receiving_domains; null for the platform domain. */
  readonly domain: string | null
}

export const toInboundAddress = (row: InboundAddressRow, platformDomain: string): InboundAddress => ({
  id: row.id,
  user_id: row.user_id,
  local_part: row.local_part,
  label: row.label,
  domain_id: row.domain_id,
  email: `${row.local_part}@${row.domain ?? platformDomain}`,
  retention_days: row.retention_days,
  created_at: iso(row.created_at)!,
})

/** Where mail for one envelope recipient goes: the inbound address it reaches. */
export interface Destination {
  readonly addressId: number
  readonly userId: number
  readonly email: string
  readonly retentionDays: number
}
