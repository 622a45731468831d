/**
 * The batch commit: many received messages stored and charged in one transaction, in a fixed
 * number of statements whatever the batch holds: one call (`ingest_commit`, migration 024) that
 * locks, admits, stores and charges, then each subscriber once. The call keeps its plans for the
 * session (PGlite plans in WASM, which cost more than the inserts) and is one round trip to a
 * PostgreSQL server where the four statements it replaced were four.
 *
 * Inside it, locks are taken in one global order, address rows by id, then wallets by user id,
 * before anything is written; two batches (two instances on one PostgreSQL) touching the same
 * account therefore queue behind each other instead of deadlocking, and neither can overdraw.
 * Messages are admitted in arrival order while the locked balance covers them, each whole or not
 * at all across the accounts it reaches; the rest are refused with nothing written for them.
 */
import { Effect } from "effect"
import { UnknownRecipient } from "../addresses/errors.ts"
import { PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import { InsufficientBalance } from "../errors.ts"
import type { DatabaseShape } from "../ports/Database.ts"
import type { AdmittedDestination } from "./admission.ts"
import type { MessageEventsShape, StoredMessage } from "./events.ts"
import type { AttachmentRow, MessageColumns } from "./rows.ts"

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

interface Answer {
  readonly refused: ReadonlyArray<
    | { readonly i: number; readonly reason: "unknown" }
    | { readonly i: number; readonly reason: "balance"; readonly required: number; readonly balance: number }
  >
  readonly stored: ReadonlyArray<{ readonly i: number; readonly id: number; readonly address_id: number; readonly user_id: number }>
}

/** The call's one parameter: the small destinations first (admission reads them), then the rows. */
const batchJson = (batch: ReadonlyArray<Prepared>): string =>
  JSON.stringify({
    price: PRICE_PER_MESSAGE_TZS,
    destinations: batch.map((p) => p.destinations.map((r) => ({ address_id: r.addressId, rcpt: r.rcpt }))),
    messages: batch.map((p, i) => ({
      i,
      trace: p.trace,
      body: p.body,
      size: p.size,
      at: p.at,
      ...p.columns,
      auth_results: p.authResults,
      tls: p.tls ?? null,
    })),
    attachments: batch.flatMap((p, i) => p.attachments.map((a) => ({ i, ...a }))),
  })

/**
 * Commits `batch` in the caller's transaction; returns one outcome per message, in order, and
 * what the subscribers want done once the transaction committed.
 */
export const commitBatch = (db: DatabaseShape, events: MessageEventsShape, batch: ReadonlyArray<Prepared>) =>
  Effect.gen(function*() {
    const [row] = yield* db.query<{ answer: Answer | string }>("SELECT ingest_commit($1::jsonb) AS answer", [batchJson(batch)])
    const answer: Answer = typeof row!.answer === "string" ? JSON.parse(row!.answer) : row!.answer
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
        fromAddr: p.columns.from_addr,
        toAddr: p.destinations.find((r) => r.addressId === Number(s.address_id))!.rcpt,
        subject: p.summary.subject,
        textBody: p.summary.textBody,
        headers: p.summary.headers,
        receivedAt: p.at,
      }
    })
    answer.stored.forEach((s, k) => mine[s.i]!.push(stored[k]!))
    if (stored.length === 0) return { outcomes, afterCommit: Effect.void }

    // Follow-up work of the subscriptions that exist (their statements go out together).
    const afterCommit = yield* events.stored(stored)
    return { outcomes, afterCommit }
  })
