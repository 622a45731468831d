/**
 * VERP return paths (DECISIONS.md "Bounces, complaints and outbound events"): every recipient of
 * an outbound message gets its own MAIL FROM,
 * `bounces+<email_id>.<recipient_index>.<tag>@{platform_domain}`, so a bounce or complaint names
 * the recipient by the address it comes back to, whatever the report's own format says. The tag,
 * the first 10 hex of HMAC-SHA256(SECRETS_KEY, `<email_id>.<recipient_index>`), makes the
 * address unguessable: nobody can mark another account's recipients as bounced.
 *
 * `recipient_index` is the recipient's position among its message's recipients (to, cc, bcc in
 * the order they were recorded, from 0).
 */
import { createHmac } from "node:crypto"
import { Option } from "effect"
import { timingSafeEqual } from "../shared/crypto.ts"

/**
 * The local part every return path starts with (then `+`). Reserved on the platform domain: an
 * inbound address of that name would otherwise receive whatever `bounces+…` mail is not a
 * return path.
 */
export const VERP_LOCAL_PART = "bounces"
export const VERP_LOCAL_PREFIX = `${VERP_LOCAL_PART}+`
const TAG_HEX = 10

/** What signs and scopes the return paths: SECRETS_KEY and the platform domain. */
export interface ReturnPathKey {
  readonly secret: Uint8Array
  readonly domain: string
}

/** SECRETS_KEY and the platform domain sign and scope the return paths. */
export const returnPathKey = (config: { readonly secretsKey: Uint8Array; readonly platformDomain: string }): ReturnPathKey => ({
  secret: config.secretsKey,
  domain: config.platformDomain,
})

export interface VerpRecipient {
  readonly emailId: number
  readonly recipientIndex: number
}

export const verpTag = (secret: Uint8Array, emailId: number, recipientIndex: number): string =>
  createHmac("sha256", secret).update(`${emailId}.${recipientIndex}`).digest("hex").slice(0, TAG_HEX)

export const returnPath = (key: ReturnPathKey, emailId: number, recipientIndex: number): string =>
  `${VERP_LOCAL_PREFIX}${emailId}.${recipientIndex}.${verpTag(key.secret, emailId, recipientIndex)}@${key.domain.toLowerCase()}`

// Canonical numbers only (no leading zeros, no signs): one address per recipient.
const SHAPE = /^bounces\+(0|[1-9]\d{0,15})\.(0|[1-9]\d{0,5})\.([0-9a-f]{10})@([^@\s]+)$/i

/** Whether the address has the VERP shape on the platform domain (before its tag is checked). */
export const looksLikeReturnPath = (key: ReturnPathKey, address: string): boolean => {
  const m = SHAPE.exec(address.trim())
  return m !== null && m[4]!.toLowerCase() === key.domain.toLowerCase()
}

/**
 * The recipient a return path names, when its shape, domain and tag are right. Whether the
 * message exists is the Bounces service's question.
 */
export const readReturnPath = (key: ReturnPathKey, address: string): Option.Option<VerpRecipient> => {
  const m = SHAPE.exec(address.trim())
  if (!m || m[4]!.toLowerCase() !== key.domain.toLowerCase()) return Option.none()
  const emailId = Number(m[1])
  const recipientIndex = Number(m[2])
  if (!Number.isSafeInteger(emailId) || emailId < 1) return Option.none()
  const expected = verpTag(key.secret, emailId, recipientIndex)
  return timingSafeEqual(m[3]!.toLowerCase(), expected) ? Option.some({ emailId, recipientIndex }) : Option.none()
}
