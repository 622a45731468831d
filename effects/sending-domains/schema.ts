/**
 * Sending domains and sender addresses as the API shows them (SPEC.md "Sending domain",
 * DECISIONS.md "Sender address"), their request bodies, rows, and the three DNS records a
 * domain publishes.
 */
import { Schema } from "effect"
import { isDomainName } from "../receiving-domains/schema.ts"
import { iso, LocalPart, Text } from "../shared/schema.ts"

export type SendingDomainStatus = "pending" | "verified" | "suspended"

/** DKIM selector of every sending domain (DECISIONS.md "Domains"). */
export const DKIM_SELECTOR = "mail"

export const DEFAULT_FROM_LOCAL_PART = "noreply"

export const DnsRecord = Schema.Struct({ type: Schema.Literal("TXT"), host: Schema.String, value: Schema.String })
export type DnsRecord = typeof DnsRecord.Type

export const CreateSendingDomain = Schema.Struct({
  domain: Text.check(
    Schema.makeFilter((s: string) => isDomainName(s), { message: "Expected a domain name such as example.co.tz" }),
  ),
  from_local_part: Schema.optional(LocalPart),
})
export type CreateSendingDomain = typeof CreateSendingDomain.Type

export const CreateSenderAddress = Schema.Struct({ local_part: LocalPart })
export type CreateSenderAddress = typeof CreateSenderAddress.Type

export const SendingDomain = Schema.Struct({
  id: Schema.Int,
  domain: Schema.String,
  purpose: Schema.Literal("sending"),
  status: Schema.Literals(["pending", "verified", "suspended"]),
  from_local_part: Schema.String,
  verified_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  /** The records to publish (also in the creation answer's `dns_records`). */
  dns_records: Schema.Array(DnsRecord),
})
export type SendingDomain = typeof SendingDomain.Type

/** The answer of POST /api/domains (DECISIONS.md "Response shapes"). */
export const CreatedSendingDomain = Schema.Struct({ domain: SendingDomain, dns_records: Schema.Array(DnsRecord) })
export type CreatedSendingDomain = typeof CreatedSendingDomain.Type

export const SenderAddress = Schema.Struct({
  id: Schema.Int,
  domain_id: Schema.Int,
  local_part: Schema.String,
  email: Schema.String,
  created_at: Schema.String,
})
export type SenderAddress = typeof SenderAddress.Type

export interface SendingDomainRow {
  readonly id: number
  readonly user_id: number
  readonly domain: string
  readonly status: SendingDomainStatus
  readonly from_local_part: string
  readonly dkim_public_key: string
  readonly dkim_private_key_sealed: string
  readonly verified_at: Date | null
  readonly last_checked_at: Date | null
  readonly next_check_at: Date | null
  readonly created_at: Date
}

export interface SenderAddressRow {
  readonly id: number
  readonly user_id: number
  readonly domain_id: number
  readonly local_part: string
  readonly is_default: boolean
  readonly created_at: Date
}

/** Where the account's mail may come from and who reports DMARC failures. */
export interface RecordSettings {
  readonly mailServerIp: string
  readonly platformDomain: string
}

/** The SPF mechanism of the mail server (`ip6:` should MAIL_SERVER_IP be IPv6). */
export const spfMechanism = (ip: string): string => `${ip.includes(":") ? "ip6" : "ip4"}:${ip}`

/** DKIM, SPF and DMARC, all TXT, with full host names (DECISIONS.md "Response shapes"). */
export const recordsFor = (row: Pick<SendingDomainRow, "domain" | "dkim_public_key">, settings: RecordSettings): Array<DnsRecord> => [
  { type: "TXT", host: `${DKIM_SELECTOR}._domainkey.${row.domain}`, value: `v=DKIM1; k=rsa; p=${row.dkim_public_key}` },
  { type: "TXT", host: row.domain, value: `v=spf1 ${spfMechanism(settings.mailServerIp)} -all` },
  {
    type: "TXT",
    host: `_dmarc.${row.domain}`,
    value: `v=DMARC1; p=quarantine; sp=quarantine; rua=mailto:dmarc@${settings.platformDomain}; adkim=s; aspf=s`,
  },
]

export const toSendingDomain = (row: SendingDomainRow, settings: RecordSettings): SendingDomain => ({
  id: row.id,
  domain: row.domain,
  purpose: "sending",
  status: row.status,
  from_local_part: row.from_local_part,
  verified_at: iso(row.verified_at),
  created_at: iso(row.created_at)!,
  dns_records: recordsFor(row, settings),
})

export const toSenderAddress = (row: SenderAddressRow & { readonly domain: string }): SenderAddress => ({
  id: row.id,
  domain_id: row.domain_id,
  local_part: row.local_part,
  email: `${row.local_part}@${row.domain}`,
  created_at: iso(row.created_at)!,
})
