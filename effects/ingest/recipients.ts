/**
 * RCPT-time lookups: which address an envelope recipient reaches, whether its receiving domain
 * is in service, and the owner's wallet balance, in one query for every recipient asked about in
 * the same tick (Effect `RequestResolver`): 20 sessions saying RCPT at once cost one round trip,
 * not twenty. The query is a SQL function (`ingest_lookup`, migration 024) so its plan is kept.
 * Matching is case-insensitive and ignores a `+tag` (`Info+news@` reaches `info`).
 *
 * What a lookup found is kept for ROUTE_TTL_MS (most mail comes to a few busy addresses, and a
 * lookup per RCPT cost the database about as much as storing the message): an address and its
 * domain's state, and the owner's balance, which each batch commit then replaces with the
 * balance it left under the wallet's lock (`remember`). A write through this process's Database
 * port to the tables a route depends on (an address deleted, a domain suspended, a wallet
 * credited, anything) forgets everything at once, so on one instance a change counts on the very
 * next RCPT; another instance's change counts within ROUTE_TTL_MS. Only what exists is kept: an
 * unknown recipient is asked about every time (an address created a moment ago gets its mail).
 * The commit re-checks every route and balance under lock either way, so what is kept can
 * only change which reply comes when, never what is stored or charged.
 *
 * A return path (`bounces+<id>.<index>.<tag>@` the platform domain) is checked before any
 * mailbox: a wrong tag or an unknown message is an unknown recipient (550 5.1.1), never a
 * mailbox's mail.
 */
import { Context, Effect, Exit, Layer, Request, RequestResolver } from "effect"
import { DomainSuspended, UnknownRecipient } from "../addresses/errors.ts"
import type { Destination } from "../addresses/schema.ts"
import { parseRecipient } from "../addresses/service.ts"
import { Bounces } from "../bounces/service.ts"
import type { VerpRecipient } from "../bounces/verp.ts"
import { AppConfig } from "../config.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { normalizeDomain } from "../receiving-domains/schema.ts"
import { makeRouteCache } from "./route-cache.ts"

/** A recipient that reaches an inbound address (charged per copy). */
export interface Mailbox {
  readonly _tag: "Mailbox"
  readonly destination: Destination
  /** The owner's wallet balance when looked up. */
  readonly balance: number
}

/**
 * A VERP return path of an outbound message (bounces and complaints come back to it): taken free
 * of charge and handed to the Bounces service instead of being stored.
 */
export interface ReturnPath {
  readonly _tag: "ReturnPath"
  readonly recipient: VerpRecipient
}

/** What a recipient is; `Ingest.admit` branches on it. */
export type RecipientTarget = Mailbox | ReturnPath

export type LookupError = UnknownRecipient | DomainSuspended | DbError

interface Lookup extends Request.Request<Mailbox, LookupError> {
  readonly _tag: "Lookup"
  readonly recipient: string
  readonly localPart: string
  readonly domain: string
}
const Lookup = Request.tagged<Lookup>("Lookup")

interface Row {
  readonly ord: number
  readonly id: number
  readonly user_id: number
  readonly retention_days: number
  readonly status: string | null
  readonly balance: number
}

export interface RecipientsShape {
  readonly lookup: (recipient: string) => Effect.Effect<RecipientTarget, LookupError>
  /**
   * What a commit found under its locks: the balances it left, and the addresses it stored copies
   * for (so they still route); both are kept as if just looked up.
   */
  readonly remember: (
    balances: ReadonlyArray<{ readonly userId: number; readonly balance: number }>,
    addressIds: ReadonlyArray<number>,
    /** `version()` before the commit started: nothing is kept if a change came through meanwhile. */
    asOf: number,
  ) => void
  /** Changes seen so far (see `remember`). */
  readonly version: () => number
}

/** How long a route and a balance are kept (bounds how late another instance's change counts here). */
export const ROUTE_TTL_MS = 250

/** Routes kept at most (spellings: `info+<anything>@` is one more each). */
export const MAX_KEPT_ROUTES = 10_000

/** Tables whose writes forget what is kept. */
const ROUTE_TABLES = ["inbound_addresses", "receiving_domains", "wallets", "users"]

export class Recipients extends Context.Service<Recipients, RecipientsShape>()("app/Recipients") {
  static readonly layer = Layer.effect(
    Recipients,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const bounces = yield* Bounces
      const platformDomain = normalizeDomain(config.platformDomain)

      const kept = makeRouteCache<Row>(MAX_KEPT_ROUTES)
      /** Bumped by every forgetting: a lookup that was under way meanwhile may have read the old state. */
      let generation = 0
      db.watchWrites(ROUTE_TABLES, () => {
        generation++
        kept.clear()
      })
      /** The process's monotonic clock: a cache lifetime, not a business time (a TestClock must not stretch it). */
      const now = () => performance.now()

      const answer = (recipient: string, localPart: string, domain: string, row: Row, balance: number): Exit.Exit<Mailbox, LookupError> =>
        row.status === "suspended"
          ? Exit.fail(new DomainSuspended({ address: recipient, domain }))
          : Exit.succeed({
            _tag: "Mailbox",
            destination: { addressId: row.id, userId: row.user_id, email: `${localPart}@${domain}`, retentionDays: row.retention_days },
            balance,
          })

      const resolver = RequestResolver.make<Lookup>((entries) =>
        Effect.gen(function*() {
          const asked = entries.map((e, ord) => ({ ord, local_part: e.request.localPart, domain: e.request.domain }))
          const asOf = generation
          const rows = yield* db.query<Row>("SELECT * FROM ingest_lookup($1, $2::json)", [platformDomain, JSON.stringify(asked)])
          const byOrd = new Map(rows.map((r) => [r.ord, r]))
          const until = now() + ROUTE_TTL_MS
          // Kept only when nothing changed while the query ran (it may have read the state before).
          const keeping = asOf === generation
          entries.forEach((entry, ord) => {
            const { recipient, localPart, domain } = entry.request
            const row = byOrd.get(ord)
            if (!row) return entry.completeUnsafe(Exit.fail(new UnknownRecipient({ address: recipient })))
            if (keeping) kept.keep(`${localPart}@${domain}`, row, until)
            entry.completeUnsafe(answer(recipient, localPart, domain, row, row.balance))
          })
        }).pipe(
          // A failed query fails every lookup of the batch with it.
          Effect.catch((e: DbError) => Effect.sync(() => entries.forEach((entry) => entry.completeUnsafe(Exit.fail(e))))),
        )
      )

      const lookup = Effect.fnUntraced(function*(recipient: string) {
        if (bounces.isReturnPath(recipient)) {
          const named = yield* bounces.parseReturnPath(recipient).pipe(
            Effect.catchTag("InvalidReturnPath", () => Effect.fail(new UnknownRecipient({ address: recipient }))),
          )
          return { _tag: "ReturnPath", recipient: named } satisfies ReturnPath
        }
        const parsed = parseRecipient(recipient)
        if (!parsed) return yield* new UnknownRecipient({ address: recipient })
        const { localPart, domain } = parsed
        const hit = kept.get(`${localPart}@${domain}`, now())
        if (hit) return yield* answer(recipient, localPart, domain, hit.row, hit.balance)
        return yield* Effect.request(Lookup({ recipient, localPart, domain }), resolver)
      })

      const remember: RecipientsShape["remember"] = (settled, addressIds, asOf) => {
        if (asOf === generation) kept.settle(settled, addressIds, now() + ROUTE_TTL_MS)
      }

      return Recipients.of({ lookup, remember, version: () => generation })
    }),
  )
}
