/**
 * Sending domains: an account adds its domain, publishes the DKIM, SPF and DMARC records it is
 * given, and verifies; from then on it may send as the domain's default local part and as the
 * sender addresses it records. A verified domain is re-checked periodically: when its records
 * vanish it is suspended (SenderIdentities then refuses it), and verified again when they return.
 */
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { Conflict, type Forbidden, type LimitReached, type NotFound, type ValidationError } from "../errors.ts"
import { Database, type DbError, isUniqueViolation } from "../ports/Database.ts"
import type { Dns } from "../ports/Dns.ts"
import { normalizeDomain } from "../receiving-domains/schema.ts"
import { insertWithinCap } from "../shared/caps.ts"
import { domainTable, now, refusePlatformDomain } from "../shared/domain-verification.ts"
import { owned } from "../shared/ownership.ts"
import { checkSendingDomain, type SendingDnsCheck } from "./check.ts"
import { generateDkimKeyPair, sealDkimKey } from "./dkim.ts"
import {
  type CreatedSendingDomain,
  type CreateSendingDomain,
  DEFAULT_FROM_LOCAL_PART,
  recordsFor,
  type SenderAddress,
  type SenderAddressRow,
  type SendingDomain,
  type SendingDomainRow,
  type SendingDomainStatus,
  toSenderAddress,
  toSendingDomain,
} from "./schema.ts"

/** Sending domains per account (SPEC.md "Limits"). */
export const MAX_SENDING_DOMAINS = 5
/** Recorded sender addresses per account (SPEC.md "From addresses per account"); defaults do not count. */
export const MAX_SENDER_ADDRESSES = 100

export interface SendingDomainsShape {
  /** Adds a pending domain with a fresh DKIM key; answers it and the three records to publish. */
  readonly create: (userId: number, body: CreateSendingDomain) => Effect.Effect<CreatedSendingDomain, ValidationError | Conflict | LimitReached | DbError>
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<SendingDomain>, DbError>
  /**
   * Checks DNS now. All three records in place → verified; otherwise the domain is answered as it
   * stands (pending, or suspended), without saying which record is wrong.
   */
  readonly verify: (userId: number, id: number) => Effect.Effect<SendingDomain, Conflict | Forbidden | NotFound | DbError>
  /** Deletes the domain and its senders. */
  readonly remove: (userId: number, id: number) => Effect.Effect<void, Conflict | Forbidden | NotFound | DbError>
  /** Records a sender (From local part) on an owned domain. */
  readonly addSender: (
    userId: number,
    domainId: number,
    localPart: string,
  ) => Effect.Effect<SenderAddress, Conflict | LimitReached | Forbidden | NotFound | DbError>
  /** Recorded senders of every domain, plus each verified domain's default local part. */
  readonly listSenders: (userId: number) => Effect.Effect<ReadonlyArray<SenderAddress>, DbError>
  /** Deletes a recorded sender; a domain's default sender goes only with its domain (409). */
  readonly removeSender: (userId: number, id: number) => Effect.Effect<void, Conflict | Forbidden | NotFound | DbError>
  /** One periodic re-check of a verified or suspended domain; returns the status it ends in. */
  readonly recheck: (row: SendingDomainRow) => Effect.Effect<SendingDomainStatus, DbError>
}

export class SendingDomains extends Context.Service<SendingDomains, SendingDomainsShape>()("app/SendingDomains") {
  static readonly layer = Layer.effect(
    SendingDomains,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const context = yield* Effect.context<Dns>()
      const table = domainTable<SendingDomainRow>(db, {
        table: "sending_domains",
        what: "sending domain",
        max: MAX_SENDING_DOMAINS,
        recheckEvery: config.domainRecheckInterval,
      })
      const settings = { mailServerIp: config.mailServerIp, platformDomain: normalizeDomain(config.platformDomain) }
      const show = (row: SendingDomainRow) => toSendingDomain(row, settings)

      const check = (row: SendingDomainRow): Effect.Effect<SendingDnsCheck> =>
        checkSendingDomain({ domain: row.domain, publicKey: row.dkim_public_key, mailServerIp: config.mailServerIp })
          .pipe(Effect.provideContext(context))

      const create = Effect.fn("SendingDomains.create")(function*(userId: number, body: CreateSendingDomain) {
        const domain = normalizeDomain(body.domain)
        yield* refusePlatformDomain(domain, config, "sending domain")
        // Cheap early refusal: a key pair costs tens of milliseconds of CPU.
        if (yield* table.atCap(userId)) return yield* table.tooMany
        const keys = yield* generateDkimKeyPair
        const sealed = yield* sealDkimKey(config.secretsKey, keys.privateKeyPem)
        const fromLocalPart = body.from_local_part ?? DEFAULT_FROM_LOCAL_PART
        const row = yield* table.insertWithinCap(
          userId,
          Effect.gen(function*() {
            const at = yield* now
            const [inserted] = yield* db.query<SendingDomainRow>(
              `INSERT INTO sending_domains (user_id, domain, from_local_part, dkim_public_key, dkim_private_key_sealed, created_at)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
              [userId, domain, fromLocalPart, keys.publicKey, sealed, at],
            )
            yield* db.query(
              "INSERT INTO sender_addresses (user_id, domain_id, local_part, is_default, created_at) VALUES ($1, $2, $3, true, $4)",
              [userId, inserted!.id, fromLocalPart, at],
            )
            return inserted!
          }),
        )
        return { domain: show(row), dns_records: recordsFor(row, settings) }
      })

      const list = Effect.fn("SendingDomains.list")(function*(userId: number) {
        const rows = yield* table.ofAccount(userId)
        return rows.map(show)
      })

      const verify = Effect.fn("SendingDomains.verify")(function*(userId: number, id: number) {
        const row = yield* table.owned(userId, id)
        if (row.status === "verified") return show(row)
        const result = yield* check(row)
        const at = yield* now
        if (!result.ok) {
          // Which record is wrong stays in the log: the answer is only the status (SPEC.md).
          yield* Effect.logDebug("sending domain not verified").pipe(
            Effect.annotateLogs({ domain: row.domain, missing: result.missing.join(","), unknown: result.unknown.join(",") }),
          )
          yield* table.markChecked(id, at)
          return show({ ...row, last_checked_at: at })
        }
        return show(yield* table.markVerified(id, at))
      })

      const remove = Effect.fn("SendingDomains.remove")(function*(userId: number, id: number) {
        yield* table.owned(userId, id)
        yield* db.query("DELETE FROM sending_domains WHERE id = $1", [id]).pipe(
          // Another capability's row that must keep pointing at the domain (e.g. an agent's reply domain).
          Effect.mapError((e) => (e.code === "23503" ? new Conflict({ message: "the domain is still in use; remove what refers to it first" }) : e)),
        )
      })

      const addSender = Effect.fn("SendingDomains.addSender")(function*(userId: number, domainId: number, localPart: string) {
        const domain = yield* table.owned(userId, domainId)
        const at = yield* now
        const row = yield* insertWithinCap(db, {
          table: "sender_addresses",
          per: ["user_id", userId],
          counting: "NOT is_default",
          max: MAX_SENDER_ADDRESSES,
          message: `an account can have at most ${MAX_SENDER_ADDRESSES} sender addresses`,
        }, Effect.map(db.query<SenderAddressRow>(
          "INSERT INTO sender_addresses (user_id, domain_id, local_part, created_at) VALUES ($1, $2, $3, $4) RETURNING *",
          [userId, domain.id, localPart, at],
        ), (rows) => rows[0]!)).pipe(
          Effect.mapError((e) =>
            e._tag === "DbError" && isUniqueViolation(e)
              ? new Conflict({ message: `${localPart}@${domain.domain} is already a sender of this domain`, field: "local_part" })
              : e
          ),
        )
        return toSenderAddress({ ...row, domain: domain.domain })
      })

      const listSenders = Effect.fn("SendingDomains.listSenders")(function*(userId: number) {
        const rows = yield* db.query<SenderAddressRow & { domain: string }>(
          `SELECT s.*, d.domain FROM sender_addresses s JOIN sending_domains d ON d.id = s.domain_id
            WHERE s.user_id = $1 AND (NOT s.is_default OR d.status = 'verified')
            ORDER BY s.domain_id, s.id`,
          [userId],
        )
        return rows.map(toSenderAddress)
      })

      const removeSender = Effect.fn("SendingDomains.removeSender")(function*(userId: number, id: number) {
        const rows = yield* db.query<SenderAddressRow>("SELECT * FROM sender_addresses WHERE id = $1", [id])
        const sender = yield* owned("sender address", rows, userId)
        if (sender.is_default) {
          return yield* new Conflict({ message: "the default sender of a domain goes only with the domain" })
        }
        yield* db.query("DELETE FROM sender_addresses WHERE id = $1", [id])
      })

      const recheck = Effect.fn("SendingDomains.recheck")(function*(row: SendingDomainRow) {
        return yield* table.recheck(row, check(row))
      })

      return SendingDomains.of({ create, list, verify, remove, addSender, listSenders, removeSender, recheck })
    }),
  )
}
