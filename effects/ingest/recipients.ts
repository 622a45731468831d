/**
 * RCPT-time lookups: which address an envelope recipient reaches, whether its receiving domain
 * is in service, and the owner's wallet balance, in one query for every recipient asked about in
 * the same tick (Effect `RequestResolver`): 20 sessions saying RCPT at once cost one round trip,
 * not twenty. The query is a SQL function (`ingest_lookup`, migration 024) so its plan is kept.
 * Matching is case-insensitive and ignores a `+tag` (`Info+news@` reaches `info`).
 *
 * Nothing is cached, so deleting an address stops its mail on the very next RCPT.
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
}

export class Recipients extends Context.Service<Recipients, RecipientsShape>()("app/Recipients") {
  static readonly layer = Layer.effect(
    Recipients,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const bounces = yield* Bounces
      const platformDomain = normalizeDomain(config.platformDomain)

      const resolver = RequestResolver.make<Lookup>((entries) =>
        Effect.gen(function*() {
          const asked = entries.map((e, ord) => ({ ord, local_part: e.request.localPart, domain: e.request.domain }))
          const rows = yield* db.query<Row>("SELECT * FROM ingest_lookup($1, $2::json)", [platformDomain, JSON.stringify(asked)])
          const byOrd = new Map(rows.map((r) => [r.ord, r]))
          entries.forEach((entry, ord) => {
            const { recipient, localPart, domain } = entry.request
            const row = byOrd.get(ord)
            entry.completeUnsafe(
              !row
                ? Exit.fail(new UnknownRecipient({ address: recipient }))
                : row.status === "suspended"
                ? Exit.fail(new DomainSuspended({ address: recipient, domain }))
                : Exit.succeed({
                  _tag: "Mailbox",
                  destination: { addressId: row.id, userId: row.user_id, email: `${localPart}@${domain}`, retentionDays: row.retention_days },
                  balance: row.balance,
                }),
            )
          })
        }).pipe(
          // A failed query fails every lookup of the batch with it.
          Effect.catch((e: DbError) => Effect.sync(() => entries.forEach((entry) => entry.completeUnsafe(Exit.fail(e))))),
        )
      )

      const lookup = Effect.fn("Recipients.lookup")(function*(recipient: string) {
        if (bounces.isReturnPath(recipient)) {
          const named = yield* bounces.parseReturnPath(recipient).pipe(
            Effect.catchTag("InvalidReturnPath", () => Effect.fail(new UnknownRecipient({ address: recipient }))),
          )
          return { _tag: "ReturnPath", recipient: named } satisfies ReturnPath
        }
        const parsed = parseRecipient(recipient)
        if (!parsed) return yield* new UnknownRecipient({ address: recipient })
        return yield* Effect.request(Lookup({ recipient, localPart: parsed.localPart, domain: parsed.domain }), resolver)
      })

      return Recipients.of({ lookup })
    }),
  )
}
