/**
 * Inbound addresses: the mailboxes an account receives on, on the platform domain or on one of
 * its verified receiving domains. Local parts are unique per domain across all accounts; a few
 * role names stay with the platform. Which address an envelope recipient reaches is looked up
 * by ingest (effects/ingest/recipients.ts, batched per tick), never cached, so deleting an
 * address stops its mail on the very next RCPT.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Authenticator } from "../auth/service.ts"
import { VERP_LOCAL_PART } from "../bounces/verp.ts"
import { Compliance } from "../compliance/service.ts"
import { AppConfig } from "../config.ts"
import { Conflict, Forbidden, type LimitReached, NotFound } from "../errors.ts"
import { purgeMessages } from "../messages/purge.ts"
import { Database, type DbError, isUniqueViolation } from "../ports/Database.ts"
import { ReceivingDomains } from "../receiving-domains/service.ts"
import { normalizeDomain } from "../receiving-domains/schema.ts"
import { insertWithinCap } from "../shared/caps.ts"
import { type CreateInboundAddress, type InboundAddress, type InboundAddressRow, toInboundAddress } from "./schema.ts"

/** Addresses per account (SPEC.md "Limits"). */
export const MAX_ADDRESSES = 100

/** Role mailboxes RFC 2142 and common practice keep for the domain's operator (DECISIONS.md). */
export const RESERVED_LOCAL_PARTS: ReadonlySet<string> = new Set([
  "postmaster",
  "abuse",
  "hostmaster",
  "webmaster",
  "mailer-daemon",
  "root",
])

export interface InboundAddressesShape {
  readonly create: (
    userId: number,
    input: CreateInboundAddress,
  ) => Effect.Effect<InboundAddress, Forbidden | NotFound | Conflict | LimitReached | DbError>
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<InboundAddress>, DbError>
  /** The caller's address: 404 when missing, 403 when another account's. Other capabilities use this. */
  readonly owned: (userId: number, id: number) => Effect.Effect<InboundAddress, Forbidden | NotFound | DbError>
  /** Deletes the address and all its messages; its mail stops routing at once. */
  readonly remove: (userId: number, id: number) => Effect.Effect<void, Forbidden | NotFound | DbError>
}

const SELECT_ADDRESS = `SELECT a.id, a.user_id, a.local_part, a.label, a.domain_id, a.retention_days, a.created_at, d.domain
                         FROM inbound_addresses a LEFT JOIN receiving_domains d ON d.id = a.domain_id`

/** Splits an envelope recipient into the stored local part and domain, or nothing if it cannot be ours. */
export const parseRecipient = (recipient: string): { readonly localPart: string; readonly domain: string } | undefined => {
  const at = recipient.lastIndexOf("@")
  if (at <= 0) return undefined
  let localPart = recipient.slice(0, at).toLowerCase()
  const plus = localPart.indexOf("+")
  if (plus > 0) localPart = localPart.slice(0, plus)
  if (!/^[a-z0-9-]{1,64}$/.test(localPart)) return undefined
  return { localPart, domain: normalizeDomain(recipient.slice(at + 1)) }
}

export class InboundAddresses extends Context.Service<InboundAddresses, InboundAddressesShape>()("app/InboundAddresses") {
  static readonly layer = Layer.effect(
    InboundAddresses,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const auth = yield* Authenticator
      const compliance = yield* Compliance
      const domains = yield* ReceivingDomains
      const show = (row: InboundAddressRow) => toInboundAddress(row, config.platformDomain)

      const ownedRow = (userId: number, id: number) =>
        Effect.gen(function*() {
          const [row] = yield* db.query<InboundAddressRow>(`${SELECT_ADDRESS} WHERE a.id = $1`, [id])
          if (!row) return yield* new NotFound({ message: "inbound address not found" })
          if (row.user_id !== userId) return yield* new Forbidden({ message: "this address belongs to another account" })
          return row
        })

      const create = Effect.fn("InboundAddresses.create")(function*(userId: number, input: CreateInboundAddress) {
        yield* auth.requireVerifiedIdentity(userId, "address")
        const domainId = input.domain_id ?? null
        if (domainId !== null) yield* domains.requireUsable(userId, domainId)
        if (RESERVED_LOCAL_PARTS.has(input.local_part)) {
          return yield* new Conflict({ message: `"${input.local_part}" is reserved`, field: "local_part" })
        }
        // The platform domain's return paths (bounces+…) are the MX's, not a mailbox's.
        if (domainId === null && input.local_part === VERP_LOCAL_PART) {
          return yield* new Conflict({ message: `"${input.local_part}" is reserved for delivery reports on the platform domain`, field: "local_part" })
        }
        const retentionDays = yield* compliance.retentionDays(userId)
        const createdAt = new Date(yield* Clock.currentTimeMillis)
        const id = yield* insertWithinCap(db, {
          table: "inbound_addresses", per: ["user_id", userId], max: MAX_ADDRESSES, message: `an account can have at most ${MAX_ADDRESSES} inbound addresses`,
        }, Effect.map(db.query<{ id: number }>(
          `INSERT INTO inbound_addresses (user_id, local_part, label, domain_id, retention_days, created_at)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
          [userId, input.local_part, input.label ?? null, domainId, retentionDays, createdAt],
        ), (rows) => rows[0]!.id)).pipe(
          Effect.mapError((e) =>
            e._tag === "DbError" && isUniqueViolation(e)
              ? new Conflict({ message: `"${input.local_part}" is already taken on this domain`, field: "local_part" })
              : e
          ),
        )
        return show(yield* ownedRow(userId, id))
      })

      const list = Effect.fn("InboundAddresses.list")(function*(userId: number) {
        const rows = yield* db.query<InboundAddressRow>(`${SELECT_ADDRESS} WHERE a.user_id = $1 ORDER BY a.id`, [userId])
        return rows.map(show)
      })

      const owned = Effect.fn("InboundAddresses.owned")(function*(userId: number, id: number) {
        return show(yield* ownedRow(userId, id))
      })

      const remove = Effect.fn("InboundAddresses.remove")(function*(userId: number, id: number) {
        yield* ownedRow(userId, id)
        yield* db.transaction(Effect.gen(function*() {
          yield* purgeMessages("SELECT id FROM inbound_messages WHERE address_id = $1", [id]).pipe(Effect.provideService(Database, db))
          yield* db.query("DELETE FROM inbound_addresses WHERE id = $1", [id])
        }))
      })

      return InboundAddresses.of({ create, list, owned, remove })
    }),
  )
}
