/**
 * The batch commit: many received messages stored and charged in one transaction, in a fixed
 * number of statements whatever the batch holds: the locks, one call storing every row
 * (`ingest_store`: multi-row inserts and one counter update per address), one conditional debit
 * per account with the ledger rows in bulk, and each subscriber once.
 *
 * Locks are taken in one global order, address rows by id, then wallets by user id, before
 * anything is written; two batches (two instances on one PostgreSQL) touching the same account
 * therefore queue behind each other instead of deadlocking, and neither can overdraw. Messages
 * are admitted in arrival order while the locked balance covers them; the rest are refused with
 * nothing written for them.
 */
import { Effect } from "effect"
import { UnknownRecipient } from "../addresses/errors.ts"
import { type BillingShape, PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import { InsufficientBalance } from "../errors.ts"
import type { DatabaseShape } from "../ports/Database.ts"
import { inList } from "../shared/values.ts"
import type { AdmittedDestination } from "./admission.ts"
import type { MessageEventsShape, StoredMessage } from "./events.ts"
import type { AttachmentRow, MessageColumns } from "./rows.ts"

const DAY_MS = 86_400_000

/** A message ready to store: parsed, authenticated, every value already safe for its column. */
export interface Prepared {
  /** One per address, in RCPT order. */
  readonly destinations: ReadonlyArray<AdmittedDestination>
  readonly columns: MessageColumns
  /** The verdicts (for a `jsonb` column). */
  readonly authResults: unknown
  readonly attachments: ReadonlyArray<AttachmentRow>
  /** Base64 of the trace header and of the message as received; stored as their concatenation. */
  readonly trace: string
  readonly body: string
  /** Bytes of trace + body. */
  readonly size: number
  readonly at: Date
  /** The session's TLS (`{protocol, cipher}`, for a `jsonb` column), or null in plaintext. */
  readonly tls?: { readonly protocol: string; readonly cipher: string } | null
  /** What subscribers are told about each stored copy. */
  readonly summary: { readonly subject: string; readonly textBody: string; readonly headers: Readonly<Record<string, unknown>> }
}

export type Outcome =
  | { readonly _tag: "Stored"; readonly messages: ReadonlyArray<StoredMessage> }
  | { readonly _tag: "Refused"; readonly error: UnknownRecipient | InsufficientBalance }

interface LiveAddress {
  readonly id: number
  readonly user_id: number
  readonly retention_days: number
}

/**
 * Commits `batch` in the caller's transaction; returns one outcome per message, in order, and
 * what the subscribers want done once the transaction committed.
 */
export const commitBatch = (
  db: DatabaseShape,
  billing: BillingShape,
  events: MessageEventsShape,
  batch: ReadonlyArray<Prepared>,
) =>
  Effect.gen(function*() {
    // 1. The addresses still take mail (not deleted, domain not suspended since RCPT); locked so they stay.
    const addressIds = [...new Set(batch.flatMap((p) => p.destinations.map((r) => r.addressId)))].sort((a, b) => a - b)
    const live = new Map((yield* db.query<LiveAddress>(
      `SELECT a.id, a.user_id, a.retention_days FROM inbound_addresses a LEFT JOIN receiving_domains d ON d.id = a.domain_id
        WHERE a.id IN (${inList(addressIds.length, "int8")}) AND (a.domain_id IS NULL OR d.status = 'verified')
        ORDER BY a.id FOR NO KEY UPDATE OF a`,
      addressIds,
    )).map((a) => [a.id, a]))

    // 2. The wallets of every account involved, locked; admission in arrival order.
    const copiesOf = batch.map((p) => p.destinations.flatMap((r) => live.get(r.addressId) ? [{ destination: r, address: live.get(r.addressId)! }] : []))
    const left = new Map(yield* billing.lockBalances(copiesOf.flatMap((cs) => cs.map((c) => c.address.user_id))))
    const outcomes: Array<Outcome | undefined> = batch.map(() => undefined)
    const admitted: Array<number> = []
    batch.forEach((p, i) => {
      const copies = copiesOf[i]!
      if (copies.length === 0) {
        outcomes[i] = { _tag: "Refused", error: new UnknownRecipient({ address: p.destinations[0]?.rcpt ?? "" }) }
        return
      }
      const cost = new Map<number, number>()
      for (const c of copies) cost.set(c.address.user_id, (cost.get(c.address.user_id) ?? 0) + PRICE_PER_MESSAGE_TZS)
      const short = [...cost].find(([userId, tzs]) => left.get(userId)! < tzs)
      if (short) {
        outcomes[i] = {
          _tag: "Refused",
          error: new InsufficientBalance({
            message: "the account cannot pay for this message",
            required_tzs: short[1],
            balance_tzs: left.get(short[0])!,
          }),
        }
        return
      }
      for (const [userId, tzs] of cost) left.set(userId, left.get(userId)! - tzs)
      admitted.push(i)
    })
    if (admitted.length === 0) return { outcomes: outcomes as Array<Outcome>, afterCommit: Effect.void }

    // 3. The rows of the admitted messages, stored in one call (ingest_store, migration 012), which
    //    answers the ids it gave in row order.
    const mime: Array<object> = []
    const attachments: Array<object> = []
    const messages: Array<object> = []
    const counters = new Map<number, number>()
    const copies: Array<{ readonly i: number; readonly userId: number; readonly addressId: number; readonly rcpt: string }> = []
    for (const i of admitted) {
      const p = batch[i]!
      const c = p.columns
      // One MIME row per account (its attachments with it), shared by that account's copies.
      for (const userId of new Set(copiesOf[i]!.map((x) => x.address.user_id))) {
        const mine = copiesOf[i]!.filter((x) => x.address.user_id === userId)
        const mimeOrd = mime.length + 1
        mime.push({ ord: mimeOrd, user_id: userId, trace: p.trace, body: p.body, size: p.size, refs: mine.length, at: p.at })
        for (const a of p.attachments) attachments.push({ mime_ord: mimeOrd, ...a })
        for (const { destination, address } of mine) {
          messages.push({
            ord: messages.length + 1,
            mime_ord: mimeOrd,
            address_id: address.id,
            user_id: userId,
            from_addr: c.from_addr,
            to_addr: destination.rcpt,
            envelope_from: c.envelope_from,
            subject: c.subject,
            text_body: c.text_body,
            html_body: c.html_body,
            headers: c.headers,
            attachments: c.attachments,
            auth_results: p.authResults,
            message_id: c.message_id,
            size: p.size,
            received_at: p.at,
            expires_at: new Date(p.at.getTime() + address.retention_days * DAY_MS),
            tls: p.tls ?? null,
          })
          counters.set(address.id, (counters.get(address.id) ?? 0) + 1)
          copies.push({ i, userId, addressId: address.id, rcpt: destination.rcpt })
        }
      }
    }
    const [row] = yield* db.query<{ ids: { messages: Array<number> } }>("SELECT ingest_store($1::json) AS ids", [
      JSON.stringify({ mime, attachments, messages, counters: [...counters].map(([address_id, n]) => ({ address_id, n })) }),
    ])
    const ids = (typeof row!.ids === "string" ? JSON.parse(row!.ids) : row!.ids).messages.map(Number)
    const stored: Array<StoredMessage> = copies.map((x, k) => {
      const p = batch[x.i]!
      return {
        id: ids[k]!,
        userId: x.userId,
        addressId: x.addressId,
        fromAddr: p.columns.from_addr,
        toAddr: x.rcpt,
        subject: p.summary.subject,
        textBody: p.summary.textBody,
        headers: p.summary.headers,
        receivedAt: p.at,
      }
    })
    for (const i of admitted) outcomes[i] = { _tag: "Stored", messages: stored.filter((_, k) => copies[k]!.i === i) }

    // 4. Follow-up work of the subscriptions that exist, and one conditional debit per account
    //    with a ledger row per message: independent statements, sent together.
    const [afterCommit] = yield* Effect.all([
      events.stored(stored),
      billing.chargeMany(
        stored.map((m) => ({ userId: m.userId, amount: PRICE_PER_MESSAGE_TZS, reference: { type: "inbound_message", id: m.id } })),
      ).pipe(
        // Checked against the locked balances above: a refusal here is a bug, not a customer's problem.
        Effect.catchTags({ InsufficientBalance: (e) => Effect.die(e), ValidationError: (e) => Effect.die(e) }),
      ),
    ], { concurrency: "unbounded" })
    return { outcomes: outcomes as Array<Outcome>, afterCommit }
  })
