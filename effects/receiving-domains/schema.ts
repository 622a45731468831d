/** Receiving domains as the API shows them (DECISIONS.md "Resources") and the rules for names. */
import { Schema } from "effect"
import { iso, Text } from "../shared/schema.ts"

export type ReceivingDomainStatus = "pending" | "verified" | "suspended"

export interface DnsRecord {
  readonly type: "TXT" | "MX" | "A"
  readonly host: string
  readonly value: string
}

/** Lowercase, trimmed, without the root's trailing dot: the form stored and compared. */
export const normalizeDomain = (input: string): string => input.trim().toLowerCase().replace(/\.$/, "")

/** LDH labels of 1..63, at least two of them, an alphabetic or punycode TLD, 253 at most. */
const DOMAIN_PATTERN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/

export const isDomainName = (input: string): boolean => DOMAIN_PATTERN.test(normalizeDomain(input))

export const CreateReceivingDomain = Schema.Struct({
  domain: Text.check(
    Schema.makeFilter((s: string) => isDomainName(s), { message: "Expected a domain name such as example.co.tz" }),
  ),
})
export type CreateReceivingDomain = typeof CreateReceivingDomain.Type

const DnsRecordSchema = Schema.Struct({ type: Schema.String, host: Schema.String, value: Schema.String })

export const ReceivingDomain = Schema.Struct({
  id: Schema.Int,
  domain: Schema.String,
  status: Schema.Literals(["pending", "verified", "suspended"]),
  verified_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  verification_record: DnsRecordSchema,
  verification_records: Schema.Array(DnsRecordSchema),
})
export type ReceivingDomain = typeof ReceivingDomain.Type

export interface ReceivingDomainRow {
  readonly id: number
  readonly user_id: number
  readonly domain: string
  readonly status: ReceivingDomainStatus
  readonly verification_token: string
  readonly verified_at: Date | null
  readonly last_checked_at: Date | null
  readonly next_check_at: Date | null
  readonly created_at: Date
}

/** The three records the customer publishes: hosts are relative to their zone (SPEC.md). */
export const recordsFor = (row: Pick<ReceivingDomainRow, "verification_token">, mxHost: string, mailServerIp: string): Array<DnsRecord> => [
  { type: "TXT", host: "@", value: `mail-verify=${row.verification_token}` },
  { type: "MX", host: "@", value: `10 ${mxHost}` },
  { type: "A", host: mxHost, value: mailServerIp },
]

export const toReceivingDomain = (row: ReceivingDomainRow, mxHost: string, mailServerIp: string): ReceivingDomain => {
  const records = recordsFor(row, mxHost, mailServerIp)
  return {
    id: row.id,
    domain: row.domain,
    status: row.status,
    verified_at: iso(row.verified_at),
    created_at: iso(row.created_at)!,
    verification_record: records[0]!,
    verification_records: records,
  }
}
