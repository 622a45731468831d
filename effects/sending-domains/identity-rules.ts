/**
 * The From rules behind `SenderIdentities` (SPEC.md "From rules", DECISIONS.md "Response
 * shapes"): an own domain must be the caller's and verified, and its From one of its senders;
 * otherwise mail goes from the platform domain. Built here, wired in identity.ts.
 */
import { Effect, Option } from "effect"
import { RESERVED_LOCAL_PARTS } from "../addresses/service.ts"
import { AppConfig } from "../config.ts"
import { Forbidden, ValidationError } from "../errors.ts"
import { Database } from "../ports/Database.ts"
import { normalizeDomain } from "../receiving-domains/schema.ts"
import { EMAIL_PATTERN } from "../shared/schema.ts"
import { openDkimKey } from "./dkim.ts"
import type { SenderIdentitiesShape, SenderIdentity } from "./identity.ts"
import { ownedSendingDomain } from "./rows.ts"
import { DKIM_SELECTOR } from "./schema.ts"

const LOCAL_PART = /^[a-z0-9-]{1,64}$/

/** `Local@Example.CO.tz` → `{ local: "local", domain: "example.co.tz" }`; undefined when not an address. */
export const splitAddress = (input: string): { readonly local: string; readonly domain: string } | undefined => {
  const address = input.trim()
  if (address.length > 254 || !EMAIL_PATTERN.test(address)) return undefined
  const at = address.lastIndexOf("@")
  return { local: address.slice(0, at).toLowerCase(), domain: normalizeDomain(address.slice(at + 1)) }
}

const fromAddressError = (message: string) => ValidationError.field("from_address", message)

export const makeSenderIdentities = Effect.gen(function*() {
  const db = yield* Database
  const config = yield* AppConfig
  const platformDomain = normalizeDomain(config.platformDomain)

  const platformSender = (fromAddress: string | undefined): Effect.Effect<SenderIdentity, ValidationError> => {
    if (fromAddress === undefined) {
      return Effect.succeed({ from: `noreply@${platformDomain}`, domainId: null, dkim: Option.none() })
    }
    const address = splitAddress(fromAddress)
    if (!address) return Effect.fail(fromAddressError("Expected an email address"))
    if (address.domain !== platformDomain) {
      return Effect.fail(fromAddressError(`without from_domain_id mail is sent from @${platformDomain}; pass the id of your verified sending domain to send from @${address.domain}`))
    }
    if (!LOCAL_PART.test(address.local)) return Effect.fail(fromAddressError("Expected a local part of 1 to 64 characters of a-z, 0-9 and -"))
    // Role mailboxes stay the platform operator's: nobody may send as postmaster@ the platform.
    if (RESERVED_LOCAL_PARTS.has(address.local)) return Effect.fail(fromAddressError(`${address.local}@${platformDomain} is reserved`))
    return Effect.succeed({ from: `${address.local}@${platformDomain}`, domainId: null, dkim: Option.none() })
  }

  const ownDomainSender = Effect.fn(function*(userId: number, domainId: number, fromAddress: string | undefined) {
    const domain = yield* ownedSendingDomain(db, userId, domainId)
    if (domain.status !== "verified") {
      return yield* new Forbidden({ message: `sending domain ${domain.domain} is ${domain.status}, not verified` })
    }
    let local = domain.from_local_part
    if (fromAddress !== undefined) {
      const address = splitAddress(fromAddress)
      if (!address) return yield* fromAddressError("Expected an email address")
      if (address.domain !== domain.domain) return yield* fromAddressError(`from_address must be on ${domain.domain}, the domain of from_domain_id`)
      local = address.local
      if (local !== domain.from_local_part) {
        const known = yield* db.query("SELECT 1 FROM sender_addresses WHERE domain_id = $1 AND local_part = $2", [domain.id, local])
        if (known.length === 0) {
          return yield* fromAddressError(`${local}@${domain.domain} is not a sender of this domain; add it with POST /api/domains/${domain.id}/senders`)
        }
      }
    }
    // A key that no longer opens means SECRETS_KEY changed: a server fault, not the caller's.
    const privateKey = yield* Effect.orDie(openDkimKey(config.secretsKey, domain.dkim_private_key_sealed))
    return {
      from: `${local}@${domain.domain}`,
      domainId: domain.id,
      dkim: Option.some({ domainName: domain.domain, keySelector: DKIM_SELECTOR, privateKey }),
    } satisfies SenderIdentity
  })

  const senderIdentity: SenderIdentitiesShape["senderIdentity"] = Effect.fn("SenderIdentities.senderIdentity")(
    function*(userId, request) {
      return request.from_domain_id === undefined
        ? yield* platformSender(request.from_address)
        : yield* ownDomainSender(userId, request.from_domain_id, request.from_address)
    },
  )

  return { senderIdentity } satisfies SenderIdentitiesShape
})
