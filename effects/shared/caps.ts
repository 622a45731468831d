/**
 * Caps on how many rows an account (or an address) may keep (DECISIONS.md "Limits"; README for the
 * ones beyond it). Creates under one owner are serialised by a transaction-scoped advisory lock,
 * so two at once cannot both take the last slot; past the cap the create is 409 LIMIT_REACHED and
 * writes nothing.
 */
import { Effect } from "effect"
import { LimitReached } from "../errors.ts"
import type { DatabaseShape, DbError } from "../ports/Database.ts"

export interface Cap {
  readonly table: string
  /** The owner the cap is per: its column and id (`["user_id", 42]`). */
  readonly per: readonly [column: string, id: number]
  /** What else a row must be to count (`is_active`). */
  readonly counting?: string
  readonly max: number
  /** The 409's message. */
  readonly message: string
}

/** Runs `insert` in a transaction when fewer than `cap.max` rows count. Table and column names come from code, never from input. */
export const insertWithinCap = <A, E, R>(db: DatabaseShape, cap: Cap, insert: Effect.Effect<A, E, R>): Effect.Effect<A, E | LimitReached | DbError, R> => {
  const [column, id] = cap.per
  const count = `SELECT count(*)::int8 AS n FROM ${cap.table} WHERE ${column} = $1${cap.counting ? ` AND ${cap.counting}` : ""}`
  return db.transaction(Effect.gen(function*() {
    yield* db.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`${cap.table}:${id}`])
    const [row] = yield* db.query<{ n: number }>(count, [id])
    if ((row?.n ?? 0) >= cap.max) return yield* new LimitReached({ message: cap.message })
    return yield* insert
  }))
}
