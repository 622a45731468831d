/**
 * Caps on how many rows an account (or an address) may keep (DECISIONS.md "Limits"; README for the
 * ones beyond it). Creates under one key are serialised by a transaction-scoped advisory lock, so
 * two at once cannot both take the last slot; past the cap the create is 409 LIMIT_REACHED and
 * writes nothing.
 */
import { Effect } from "effect"
import { LimitReached } from "../errors.ts"
import type { DatabaseShape, DbError } from "../ports/Database.ts"

export interface Cap {
  /** What serialises the creates: the table and the owner, e.g. `templates:42`. */
  readonly key: string
  /** A statement answering `n`, the rows that count now. */
  readonly count: string
  readonly params: ReadonlyArray<unknown>
  readonly max: number
  /** The 409's message. */
  readonly message: string
}

/** Runs `insert` in a transaction when fewer than `cap.max` rows count. */
export const insertWithinCap = <A, E, R>(db: DatabaseShape, cap: Cap, insert: Effect.Effect<A, E, R>): Effect.Effect<A, E | LimitReached | DbError, R> =>
  db.transaction(Effect.gen(function*() {
    yield* db.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [cap.key])
    const [row] = yield* db.query<{ n: number }>(cap.count, cap.params)
    if ((row?.n ?? 0) >= cap.max) return yield* new LimitReached({ message: cap.message })
    return yield* insert
  }))
