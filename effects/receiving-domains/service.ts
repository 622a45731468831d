/**
 * Receiving domains: an account proves it owns a domain with a DNS TXT token, points the
 * domain's MX at the platform, and then creates addresses on it. A verified domain is
 * re-checked periodically: when its records vanish it is suspended (mail to it is deferred with
 * 451 4.4.3), and it is verified again when they return.
 */
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { Conflict, Forbidden, type LimitReached, type NotFound, Pending, type ValidationError } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import type { Dns } from "../ports/Dns.ts"
import { randomHex } from "../shared/crypto.ts"
import { domainTable, now, refusePlatformDomain } from "../shared/domain-verification.ts"
import { checkReceivingDomain, type DnsCheck } from "./check.ts"
import { normalizeDomain, type ReceivingDomain, type ReceivingDomainRow, type ReceivingDomainStatus, toReceivingDomain } from "./schema.ts"

/** Receiving domains per account (DECISIONS.md "Domains"). */
export const MAX_RECEIVING_DOMAINS = 100

export interface ReceivingDomainsShape {
  readonly create: (userId: number, domain: string) => Effect.Effect<ReceivingDomain, ValidationError | Conflict | LimitReached | DbError>
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<ReceivingDomain>, DbError>
  /** Checks DNS now: verified, or PENDING carrying the domain as it stands. */
  readonly verify: (userId: number, id: number) => Effect.Effect<ReceivingDomain, Pending | Conflict | Forbidden | NotFound | DbError>
  /** Deletes a domain no address uses (409 CONFLICT otherwise). */
  readonly remove: (userId: number, id: number) => Effect.Effect<void, Conflict | Forbidden | NotFound | DbError>
  /** The caller's domain, verified, for a new address: 404 unknown, 403 another's or not verified. */
  readonly requireUsable: (userId: number, id: number) => Effect.Effect<ReceivingDomainRow, Forbidden | NotFound | DbError>
  /** One periodic re-check of a verified or suspended domain; returns the status it ends in. */
  readonly recheck: (row: ReceivingDomainRow) => Effect.Effect<ReceivingDomainStatus, DbError>
}

export class ReceivingDomains extends Context.Service<ReceivingDomains, ReceivingDomainsShape>()("app/ReceivingDomains") {
  static readonly layer = Layer.effect(
    ReceivingDomains,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const context = yield* Effect.context<Dns>()
      const table = domainTable<ReceivingDomainRow>(db, {
        table: "receiving_domains",
        what: "receiving domain",
        max: MAX_RECEIVING_DOMAINS,
        recheckEvery: config.domainRecheckInterval,
      })
      const show = (row: ReceivingDomainRow) => toReceivingDomain(row, config.mxHost, config.mailServerIp)

      const ownedDomain = table.owned

      const check = (row: ReceivingDomainRow): Effect.Effect<DnsCheck> =>
        checkReceivingDomain({ domain: row.domain, token: row.verification_token, mxHost: config.mxHost, mailServerIp: config.mailServerIp })
          .pipe(Effect.provideContext(context))

      const create = Effect.fn("ReceivingDomains.create")(function*(userId: number, input: string) {
        const domain = normalizeDomain(input)
        yield* refusePlatformDomain(domain, config, "receiving domain")
        const token = yield* randomHex(32)
        const row = yield* table.insertWithinCap(
          userId,
          Effect.flatMap(now, (at) =>
            db.query<ReceivingDomainRow>(
              "INSERT INTO receiving_domains (user_id, domain, verification_token, created_at) VALUES ($1, $2, $3, $4) RETURNING *",
              [userId, domain, token, at],
            )).pipe(Effect.map(([inserted]) => inserted!)),
        )
        return show(row)
      })

      const list = Effect.fn("ReceivingDomains.list")(function*(userId: number) {
        const rows = yield* table.ofAccount(userId)
        return rows.map(show)
      })

      const verify = Effect.fn("ReceivingDomains.verify")(function*(userId: number, id: number) {
        const row = yield* ownedDomain(userId, id)
        if (row.status === "verified") return show(row)
        const result = yield* check(row)
        const at = yield* now
        if (!result.ok) {
          yield* table.markChecked(id, at)
          const parts = [
            ...(result.missing.length ? [`not found yet: ${result.missing.join(", ")}`] : []),
            ...(result.unknown.length ? [`lookup failed: ${result.unknown.join(", ")}`] : []),
          ]
          return yield* new Pending({ message: `DNS records are not in place (${parts.join("; ")})`, data: show({ ...row, last_checked_at: at }) })
        }
        return show(yield* table.markVerified(id, at))
      })

      const remove = Effect.fn("ReceivingDomains.remove")(function*(userId: number, id: number) {
        yield* ownedDomain(userId, id)
        const inUse = new Conflict({ message: "addresses still use this domain; delete them first" })
        yield* db.transaction(Effect.gen(function*() {
          const [used] = yield* db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM inbound_addresses WHERE domain_id = $1", [id])
          if ((used?.n ?? 0) > 0) return yield* inUse
          yield* db.query("DELETE FROM receiving_domains WHERE id = $1", [id])
        })).pipe(
          // An address created on it meanwhile: the foreign key refuses the delete.
          Effect.mapError((e) => (e._tag === "DbError" && e.code === "23503" ? inUse : e)),
        )
      })

      const requireUsable = Effect.fn("ReceivingDomains.requireUsable")(function*(userId: number, id: number) {
        const row = yield* ownedDomain(userId, id)
        if (row.status !== "verified") {
          return yield* new Forbidden({ message: `receiving domain ${row.domain} is ${row.status}, not verified` })
        }
        return row
      })

      const recheck = Effect.fn("ReceivingDomains.recheck")(function*(row: ReceivingDomainRow) {
        return yield* table.recheck(row, check(row))
      })

      return ReceivingDomains.of({ create, list, verify, remove, requireUsable, recheck })
    }),
  )
}
