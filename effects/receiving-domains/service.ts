/**
 * Receiving domains: an account proves it owns a domain with a DNS TXT token, points the
 * domain's MX at the platform, and then creates addresses on it. A verified domain is
 * re-checked periodically: when its records vanish it is suspended (mail to it is deferred with
 * 451 4.4.3), and it is verified again when they return.
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { Conflict, Forbidden, LimitReached, NotFound, Pending, ValidationError } from "../errors.ts"
import { Database, type DbError, isUniqueViolation } from "../ports/Database.ts"
import type { Dns } from "../ports/Dns.ts"
import { randomHex } from "../shared/crypto.ts"
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
      const recheckEvery = Duration.fromInputUnsafe(config.domainRecheckInterval)
      const show = (row: ReceivingDomainRow) => toReceivingDomain(row, config.mxHost, config.mailServerIp)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const owned = (userId: number, id: number) =>
        Effect.gen(function*() {
          const [row] = yield* db.query<ReceivingDomainRow>("SELECT * FROM receiving_domains WHERE id = $1", [id])
          if (!row) return yield* new NotFound({ message: "receiving domain not found" })
          if (row.user_id !== userId) return yield* new Forbidden({ message: "this receiving domain belongs to another account" })
          return row
        })

      const check = (row: ReceivingDomainRow): Effect.Effect<DnsCheck> =>
        checkReceivingDomain({ domain: row.domain, token: row.verification_token, mxHost: config.mxHost, mailServerIp: config.mailServerIp })
          .pipe(Effect.provideContext(context))

      const create = Effect.fn("ReceivingDomains.create")(function*(userId: number, input: string) {
        const domain = normalizeDomain(input)
        const platform = [config.platformDomain, config.mxHost].map(normalizeDomain)
        if (platform.some((p) => domain === p || domain.endsWith(`.${p}`))) {
          return yield* ValidationError.field("domain", "the platform's own domain cannot be added as a receiving domain")
        }
        const token = yield* randomHex(32)
        const row = yield* db.transaction(Effect.gen(function*() {
          // Serialises this account's creates, so two at once cannot both take the last slot.
          yield* db.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`receiving_domains:${userId}`])
          const [count] = yield* db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM receiving_domains WHERE user_id = $1", [userId])
          if ((count?.n ?? 0) >= MAX_RECEIVING_DOMAINS) {
            return yield* new LimitReached({ message: `an account can have at most ${MAX_RECEIVING_DOMAINS} receiving domains` })
          }
          const [inserted] = yield* db.query<ReceivingDomainRow>(
            "INSERT INTO receiving_domains (user_id, domain, verification_token, created_at) VALUES ($1, $2, $3, $4) RETURNING *",
            [userId, domain, token, yield* now],
          )
          return inserted!
        })).pipe(
          Effect.mapError((e) =>
            e._tag === "DbError" && isUniqueViolation(e)
              ? new Conflict({ message: "this domain was already added to the account", field: "domain" })
              : e
          ),
        )
        return show(row)
      })

      const list = Effect.fn("ReceivingDomains.list")(function*(userId: number) {
        const rows = yield* db.query<ReceivingDomainRow>("SELECT * FROM receiving_domains WHERE user_id = $1 ORDER BY id", [userId])
        return rows.map(show)
      })

      const verify = Effect.fn("ReceivingDomains.verify")(function*(userId: number, id: number) {
        const row = yield* owned(userId, id)
        if (row.status === "verified") return show(row)
        const result = yield* check(row)
        const at = yield* now
        if (!result.ok) {
          yield* db.query("UPDATE receiving_domains SET last_checked_at = $2 WHERE id = $1", [id, at])
          const parts = [
            ...(result.missing.length ? [`not found yet: ${result.missing.join(", ")}`] : []),
            ...(result.unknown.length ? [`lookup failed: ${result.unknown.join(", ")}`] : []),
          ]
          return yield* new Pending({ message: `DNS records are not in place (${parts.join("; ")})`, data: show({ ...row, last_checked_at: at }) })
        }
        const [updated] = yield* db.query<ReceivingDomainRow>(
          `UPDATE receiving_domains
              SET status = 'verified', verified_at = COALESCE(verified_at, $2), last_checked_at = $2, next_check_at = $3, locked_until = NULL
            WHERE id = $1 RETURNING *`,
          [id, at, new Date(at.getTime() + Duration.toMillis(recheckEvery))],
        ).pipe(
          Effect.mapError((e) =>
            isUniqueViolation(e) ? new Conflict({ message: "this domain is already verified by another account", field: "domain" }) : e
          ),
        )
        return show(updated!)
      })

      const remove = Effect.fn("ReceivingDomains.remove")(function*(userId: number, id: number) {
        yield* owned(userId, id)
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
        const row = yield* owned(userId, id)
        if (row.status !== "verified") {
          return yield* new Forbidden({ message: `receiving domain ${row.domain} is ${row.status}, not verified` })
        }
        return row
      })

      const recheck = Effect.fn("ReceivingDomains.recheck")(function*(row: ReceivingDomainRow) {
        const result = yield* check(row)
        const at = yield* now
        // An outage proves nothing: keep the status and look again next round.
        const next: ReceivingDomainStatus = result.ok ? "verified" : result.missing.length > 0 ? "suspended" : row.status
        yield* db.query(
          `UPDATE receiving_domains SET status = $2, last_checked_at = $3, next_check_at = $4, locked_until = NULL
            WHERE id = $1 AND status <> 'pending'`,
          [row.id, next, at, new Date(at.getTime() + Duration.toMillis(recheckEvery))],
        ).pipe(
          // Restoring a domain another account verified meanwhile: it stays suspended.
          Effect.catchTag("DbError", (e) =>
            isUniqueViolation(e)
              ? db.query("UPDATE receiving_domains SET locked_until = NULL, last_checked_at = $2 WHERE id = $1", [row.id, at])
              : Effect.fail(e)),
        )
        if (next !== row.status) {
          yield* Effect.logInfo("receiving domain status changed").pipe(
            Effect.annotateLogs({ domain: row.domain, from: row.status, to: next, missing: result.missing.join(",") }),
          )
        }
        return next
      })

      return ReceivingDomains.of({ create, list, verify, remove, requireUsable, recheck })
    }),
  )
}
