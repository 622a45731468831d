/**
 * The batch commit: many received messages stored and charged in one transaction, in a fixed
 * number of statements whatever the batch holds: one call (`ingest_batch_bytes`, migration 031)
 * that locks, admits, stores and charges, sent with the question of which subscribers the batch
 * needs (./events.ts), then each of those once. The call keeps its plans for the session (PGlite
 * plans in WASM, which cost more than the inserts); with the question it is one round trip to a
 * PostgreSQL server. A batch none of whose addresses has a subscription needs no transaction
 * around the call: `ingest_batch_alone` (migration 032) is the whole commit in one statement.
 *
 * Inside it, locks are taken in one global order, address rows by id, then wallets by user id,
 * before anything is written; two batches (two instances on one PostgreSQL) touching the same
 * account therefore queue behind each other instead of deadlocking, and neither can overdraw.
 * Messages are admitted in arrival order while the locked balance covers them, each whole or not
 * at all across the accounts it reaches; the rest are refused with nothing written for them.
 *
 * Each message's row arrives already encoded as JSON text and its bytes beside it (./prepare.ts,
 * on a worker thread): the parameters are those texts joined and those bytes joined, so the event
 * loop never serialises a message body, and the database never reads one as JSON. On PGlite
 * small mail's rows and bytes never come to the event loop at all: they stay on the database's
 * thread that prepared them, and the batch names them there (./batch-parameters.ts `KeptBatch`).
 */
import { Effect } from "effect"
import { UnknownRecipient } from "../addresses/errors.ts"
import { PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import { InsufficientBalance } from "../errors.ts"
import type { DatabaseShape } from "../ports/Database.ts"
import type { AdmittedDestination } from "./admission.ts"
import type { MessageEventsShape, StoredMessage } from "./events.ts"
import { type BatchDestination, batchParameters, KeptBatch } from "./batch-parameters.ts"
import type { PreparedMessage, ReadyMessage } from "./prepare.ts"

/** A message ready to store: authenticated, parsed, its row encoded, and where its copies go. */
export interface Prepared<M extends ReadyMessage = ReadyMessage> {
  /** One per address, in RCPT order. */
  readonly destinations: ReadonlyArray<AdmittedDestination>
  readonly message: M
  /** When it was received (the row says the same). */
  readonly at: Date
}

export type Outcome =
  | { readonly _tag: "Stored"; readonly messages: ReadonlyArray<StoredMessage> }
  | { readonly _tag: "Refused"; readonly error: UnknownRecipient | InsufficientBalance }

interface Answer {
  readonly refused: ReadonlyArray<
    | { readonly i: number; readonly reason: "unknown" }
    | { readonly i: number; readonly reason: "balance"; readonly required: number; readonly balance: number }
  >
  readonly stored: ReadonlyArray<{ readonly i: number; readonly id: number; readonly address_id: number; readonly user_id: number }>
  /** The locked wallets and the balances this transaction leaves them with (parallel arrays). */
  readonly wallets: ReadonlyArray<number>
  readonly balances: ReadonlyArray<number>
}

/** Each message's copies as the call reads them. */
const destinationsOf = (batch: ReadonlyArray<Prepared>): Array<Array<BatchDestination>> =>
  batch.map((p) => p.destinations.map((r) => ({ address_id: r.addressId, rcpt: r.rcpt })))

/** The call's two parameters, from messages in hand (./batch-parameters.ts). */
export const parametersOf = (batch: ReadonlyArray<Prepared<PreparedMessage>>): [string, Buffer] =>
  batchParameters(PRICE_PER_MESSAGE_TZS, destinationsOf(batch), batch.map((p) => p.message))

/** What a commit did: one outcome per message, in order, and the balances it left. */
export interface Committed {
  readonly outcomes: ReadonlyArray<Outcome>
  readonly balances: ReadonlyArray<{ readonly userId: number; readonly balance: number }>
  /** What the subscribers want done once the transaction committed. */
  readonly afterCommit: Effect.Effect<void>
  /** No subscriber applied to the batch's addresses (none of its copies has follow-up work). */
  readonly quiet: boolean
}

/** The call's answer, read: outcomes per message and the copies stored. */
const settle = (batch: ReadonlyArray<Prepared>, answer: Answer) => {
  const mine: Array<Array<StoredMessage>> = batch.map(() => [])
  const outcomes: Array<Outcome> = mine.map((messages) => ({ _tag: "Stored", messages }))
  for (const r of answer.refused) {
    outcomes[r.i] = {
      _tag: "Refused",
      error: r.reason === "unknown"
        ? new UnknownRecipient({ address: batch[r.i]!.destinations[0]?.rcpt ?? "" })
        : new InsufficientBalance({
          message: "the account cannot pay for this message",
          required_tzs: Number(r.required),
          balance_tzs: Number(r.balance),
        }),
    }
  }
  const stored: Array<StoredMessage> = answer.stored.map((s) => {
    const p = batch[s.i]!
    return {
      id: Number(s.id),
      userId: Number(s.user_id),
      addressId: Number(s.address_id),
      fromAddr: p.message.fromAddr,
      toAddr: p.destinations.find((r) => r.addressId === Number(s.address_id))!.rcpt,
      subject: p.message.subject,
      ...(p.message.smsBody === undefined ? {} : { smsBody: p.message.smsBody }),
      receivedAt: p.at,
    }
  })
  answer.stored.forEach((s, k) => mine[s.i]!.push(stored[k]!))
  const balances = answer.wallets.map((userId, k) => ({ userId: Number(userId), balance: Number(answer.balances[k]) }))
  return { outcomes, balances, stored }
}

const answerOf = <A>(value: A | string): A => (typeof value === "string" ? JSON.parse(value) : value)

const allInHand = (batch: ReadonlyArray<Prepared>): batch is ReadonlyArray<Prepared<PreparedMessage>> =>
  batch.every((p) => !("kept" in p.message))

/** `SELECT <fn>(batch, blob) AS answer` with the batch's two parameters, as the adapter sends bytes best. */
const batchCall = (db: DatabaseShape, fn: "ingest_batch_bytes" | "ingest_batch_alone", batch: ReadonlyArray<Prepared>) => {
  if (!allInHand(batch)) {
    // Some rows and bytes are on PGlite's thread: it builds both parameters there.
    const messages = batch.map(({ message: m }) => ("kept" in m ? { kept: m.kept } : { row: m.row, bytes: m.bytes }))
    const kept = new KeptBatch(PRICE_PER_MESSAGE_TZS, destinationsOf(batch), messages)
    return db.query<{ answer: unknown }>(`SELECT ${fn}($1::jsonb, $2::bytea) AS answer`, [kept])
  }
  const [json, bytes] = parametersOf(batch)
  // The batch's bytes were made for this statement alone: handed over, not copied.
  const blob = db.bytea(2, bytes, true)
  return db.query<{ answer: unknown }>(`SELECT ${fn}($1::jsonb, ${blob.sql}) AS answer`, [json, blob.value])
}

/**
 * Commits `batch` in the caller's transaction; returns one outcome per message, in order, the
 * balances it left, and what the subscribers want done once the transaction committed.
 */
export const commitBatch = (db: DatabaseShape, events: MessageEventsShape, batch: ReadonlyArray<Prepared>) =>
  Effect.gen(function*() {
    // Which subscribers the batch may need is asked alongside storing it (one round trip to a
    // PostgreSQL server), for every destination: a superset of the copies that will be stored.
    const [[row], plan] = yield* Effect.all([
      batchCall(db, "ingest_batch_bytes", batch),
      events.plan(batch.flatMap((p) => p.destinations)),
    ], { concurrency: "unbounded" })
    const { outcomes, balances, stored } = settle(batch, answerOf<Answer>(row!.answer as Answer | string))
    if (stored.length === 0) return { outcomes, balances, afterCommit: Effect.void, quiet: plan.quiet } satisfies Committed

    // Follow-up work of the subscriptions that exist (their statements go out together).
    const afterCommit = yield* plan.stored(stored)
    return { outcomes, balances, afterCommit, quiet: plan.quiet } satisfies Committed
  })

/**
 * Commits `batch` with one statement and no transaction around it (`ingest_batch_alone`,
 * migration 032), when no subscription applies to its addresses; otherwise writes nothing and
 * answers undefined, and the batch goes to `commitBatch`. The statement is not interrupted once
 * sent: its outcome, committed or not, is always the one its senders hear.
 */
export const commitAlone = (db: DatabaseShape, batch: ReadonlyArray<Prepared>) =>
  Effect.gen(function*() {
    const [row] = yield* Effect.uninterruptible(batchCall(db, "ingest_batch_alone", batch))
    const answer = answerOf<Answer | { followups: true }>(row!.answer as Answer | { followups: true } | string)
    if ("followups" in answer) return undefined
    const { outcomes, balances } = settle(batch, answer)
    return { outcomes, balances, afterCommit: Effect.void, quiet: true } satisfies Committed
  })
