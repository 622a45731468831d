/**
 * The batch commit: many received messages stored and charged in one transaction, in a fixed
 * number of statements whatever the batch holds (multi-row inserts, one counter update per
 * address, one conditional debit per account, ledger rows in bulk, subscribers once).
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
import { inList, Shared, valuesLists } from "../shared/values.ts"
import type { AdmittedRoute } from "./admission.ts"
import type { MessageEventsShape, StoredMessage } from "./events.ts"
import type { AttachmentRow, MessageColumns } from "./rows.ts"

const DAY_MS = 86_400_000

/** A message ready to store: parsed, authenticated, every value already safe for its column. */
export interface Prepared {
  /** One per address, in RCPT order. */
  readonly routes: ReadonlyArray<AdmittedRoute>
  readonly columns: MessageColumns
  /** JSON text of the verdicts. */
  readonly authResults: string
  readonly attachments: ReadonlyArray<AttachmentRow>
  /** Base64 of the trace header and of the message as received; stored as their concatenation. */
  readonly trace: Shared<string>
  readonly body: Shared<string>
  /** Bytes of trace + body. */
  readonly size: number
  readonly at: Date
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

/** Commits `batch` in one transaction (the caller's `db.transaction`); returns one outcome per message, in order. */
export const commitBatch = (
  db: DatabaseShape,
  billing: BillingShape,
  events: MessageEventsShape,
  batch: ReadonlyArray<Prepared>,
) =>
  Effect.gen(function*() {
    // 1. The addresses still route (not deleted, domain not suspended since RCPT); locked so they stay.
    const addressIds = [...new Set(batch.flatMap((p) => p.routes.map((r) => r.addressId)))].sort((a, b) => a - b)
    const live = new Map((yield* db.query<LiveAddress>(
      `SELECT a.id, a.user_id, a.retention_days FROM inbound_addresses a LEFT JOIN receiving_domains d ON d.id = a.domain_id
        WHERE a.id IN (${inList(addressIds.length, "int8")}) AND (a.domain_id IS NULL OR d.status = 'verified')
        ORDER BY a.id FOR NO KEY UPDATE OF a`,
      addressIds,
    )).map((a) => [a.id, a]))

    // 2. The wallets of every account involved, locked; admission in arrival order.
    const copiesOf = batch.map((p) => p.routes.flatMap((r) => live.get(r.addressId) ? [{ route: r, address: live.get(r.addressId)! }] : []))
    const left = new Map(yield* billing.lockBalances(copiesOf.flatMap((cs) => cs.map((c) => c.address.user_id))))
    const outcomes: Array<Outcome | undefined> = batch.map(() => undefined)
    const admitted: Array<number> = []
    batch.forEach((p, i) => {
      const copies = copiesOf[i]!
      if (copies.length === 0) {
        outcomes[i] = { _tag: "Refused", error: new UnknownRecipient({ address: p.routes[0]?.rcpt ?? "" }) }
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
    if (admitted.length === 0) return outcomes as Array<Outcome>

    // 3. Ids for every row up front, so all rows are built before one INSERT per table.
    const accountsOf = (i: number) => [...new Set(copiesOf[i]!.map((c) => c.address.user_id))]
    const mimeCount = admitted.reduce((n, i) => n + accountsOf(i).length, 0)
    const messageCount = admitted.reduce((n, i) => n + copiesOf[i]!.length, 0)
    const ids = yield* db.query<{ kind: string; id: number }>(
      `SELECT 'mime' AS kind, nextval('inbound_mime_id_seq') AS id FROM generate_series(1, $1::int4)
       UNION ALL SELECT 'message', nextval('inbound_messages_id_seq') FROM generate_series(1, $2::int4)`,
      [mimeCount, messageCount],
    )
    const mimeIds = ids.filter((r) => r.kind === "mime").map((r) => r.id).sort((a, b) => a - b)
    const messageIds = ids.filter((r) => r.kind === "message").map((r) => r.id).sort((a, b) => a - b)

    const mimeRows: Array<Array<unknown>> = []
    const attachmentRows: Array<Array<unknown>> = []
    const messageRows: Array<Array<unknown>> = []
    const counters = new Map<number, number>()
    const stored: Array<StoredMessage> = []
    for (const i of admitted) {
      const p = batch[i]!
      const c = p.columns
      // Sent once per statement however many copies store them.
      const [text, html, headers] = [new Shared(c.text_body), new Shared(c.html_body), new Shared(c.headers)]
      const mine: Array<StoredMessage> = []
      // One MIME row per account (its attachments with it), shared by that account's copies.
      for (const userId of accountsOf(i)) {
        const copies = copiesOf[i]!.filter((c) => c.address.user_id === userId)
        const mimeId = mimeIds.shift()!
        mimeRows.push([mimeId, userId, p.trace, p.body, p.size, copies.length, p.at])
        for (const a of p.attachments) {
          attachmentRows.push([mimeId, a.position, a.filename, a.content_type, a.content_id, a.size, a.content])
        }
        for (const { route, address } of copies) {
          const id = messageIds.shift()!
          messageRows.push([
            id, address.id, userId, mimeId, c.from_addr, route.rcpt, c.envelope_from, c.subject, text, html,
            headers, c.attachments, p.authResults, c.message_id, p.size, p.at, new Date(p.at.getTime() + address.retention_days * DAY_MS),
          ])
          counters.set(address.id, (counters.get(address.id) ?? 0) + 1)
          mine.push({
            id,
            userId,
            addressId: address.id,
            fromAddr: c.from_addr,
            toAddr: route.rcpt,
            subject: p.summary.subject,
            textBody: p.summary.textBody,
            headers: p.summary.headers,
            receivedAt: p.at,
          })
        }
      }
      outcomes[i] = { _tag: "Stored", messages: mine }
      stored.push(...mine)
    }

    // 4. The rows, one statement per table.
    for (const v of valuesLists(["int8", "int8", "base64", "base64", "int4", "int4", "timestamptz"], mimeRows)) {
      yield* db.query(
        `INSERT INTO inbound_mime (id, user_id, raw, size_bytes, message_refs, created_at)
         SELECT id, user_id, trace || body, size, refs, at FROM (${v.sql}) AS v (id, user_id, trace, body, size, refs, at)`,
        v.params,
      )
    }
    for (const v of valuesLists(["int8", "int4", "text", "text", "text", "int4", "base64"], attachmentRows)) {
      yield* db.query(`INSERT INTO inbound_attachments (mime_id, position, filename, content_type, content_id, size, content) ${v.sql}`, v.params)
    }
    const messageColumns = [
      "int8", "int8", "int8", "int8", "text", "text", "text", "text", "text", "text",
      "jsonb", "jsonb", "jsonb", "text", "int4", "timestamptz", "timestamptz",
    ] as const
    for (const v of valuesLists(messageColumns, messageRows)) {
      yield* db.query(
        `INSERT INTO inbound_messages (id, address_id, user_id, mime_id, from_addr, to_addr, envelope_from, subject, text_body, html_body,
                                       headers, attachments, auth_results, message_id, size_bytes, received_at, expires_at) ${v.sql}`,
        v.params,
      )
    }

    // 5. Follow-up work of the subscriptions that exist, in this same transaction.
    yield* events.stored(stored)

    // 6. One counter update per address (rows already locked), one debit per account, a ledger row per message.
    for (const v of valuesLists(["int8", "int8"], [...counters].sort(([a], [b]) => a - b))) {
      yield* db.query(
        `UPDATE inbound_addresses a SET message_count = a.message_count + v.n, unread_count = a.unread_count + v.n
           FROM (${v.sql}) AS v (id, n) WHERE a.id = v.id`,
        v.params,
      )
    }
    yield* billing.chargeMany(
      stored.map((m) => ({ userId: m.userId, amount: PRICE_PER_MESSAGE_TZS, reference: { type: "inbound_message", id: m.id } })),
    ).pipe(
      // Checked against the locked balances above: a refusal here is a bug, not a customer's problem.
      Effect.catchTags({ InsufficientBalance: (e) => Effect.die(e), ValidationError: (e) => Effect.die(e) }),
    )
    return outcomes as Array<Outcome>
  })
