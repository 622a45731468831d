/**
 * The Database port: the only way the core touches PostgreSQL. Two adapters implement it
 * (src/db/pglite.ts for the embedded default, src/db/postgres.ts for DATABASE_URL); both run
 * the same SQL with `$1` placeholders.
 *
 * Transactions are ambient: inside `transaction(effect)` every `query` made by `effect` (and by
 * any service it calls) runs on the transaction's connection, so services compose into one
 * atomic unit without passing a handle around.
 */
import { Cause, Context, Effect, Exit, Schema, SchemaIssue } from "effect"

/** A failed statement. `code` is the SQLSTATE (23505 unique violation, 40001 serialization, …). */
export class DbError extends Schema.TaggedError<DbError>()("DbError", {
  message: Schema.String,
  code: Schema.optional(Schema.String),
  constraint: Schema.optional(Schema.String),
}) {}

export type Row = Record<string, unknown>

/** A bytea parameter as an adapter sends it best: the SQL that reads it, and the value to bind. */
export interface ByteaParameter {
  readonly sql: string
  readonly value: unknown
}

/** A connection that can run statements (the pool, or a transaction's reserved connection). */
export interface Connection {
  readonly query: (text: string, params?: ReadonlyArray<unknown>) => Promise<Array<Row>>
}

export interface DatabaseShape {
  /** Runs one statement; rows come back with int8 as number and timestamps as Date. */
  readonly query: <T = Row>(text: string, params?: ReadonlyArray<unknown>) => Effect.Effect<Array<T>, DbError>
  /** Runs `effect` in one transaction (joins the surrounding one if already inside). Rolls back on any failure. */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DbError, R>
  /** Runs a multi-statement script (migrations); joins the surrounding transaction if any. */
  readonly exec: (script: string) => Effect.Effect<void, DbError>
  /**
   * `bytes` as the bytea parameter `$n` of a statement, sent the adapter's cheapest way (it matters
   * for megabytes: an ingest batch). PGlite binds bytes in binary; postgres.js sends parameters as
   * text only, where base64 that the server decodes is 4/3 of the bytes against 2 for bytea's hex.
   * `handOver`: the caller never reads or writes `bytes` again, so an adapter whose database runs
   * on another thread may move them there instead of copying, and one that encodes them frees them
   * once encoded (either way the caller's view is emptied).
   */
  readonly bytea: (n: number, bytes: Uint8Array, handOver?: boolean) => ByteaParameter
  /** Which engine is behind the port; tests and benchmarks report it. */
  readonly dialect: "pglite" | "postgres"
  /**
   * Calls `changed` whenever a statement of this process writes one of `tables` (INSERT, UPDATE,
   * DELETE, TRUNCATE naming it): when the statement is sent and again once it committed (at the
   * end of its transaction). For caches of this process that must not outlive a change made
   * through the port; changes made by other processes are theirs to bound (a TTL).
   */
  readonly watchWrites: (tables: ReadonlyArray<string>, changed: () => void) => void
}

export class Database extends Context.Service<Database, DatabaseShape>()("app/Database") {}

/** True when a failure is a unique-constraint violation (map it to CONFLICT, never by message text). */
export const isUniqueViolation = (e: DbError): boolean => e.code === "23505"

/** First row or undefined. */
export const first = <T>(rows: Array<T>): T | undefined => rows[0]

const formatIssue = SchemaIssue.makeFormatterDefault()

/**
 * Checks rows against `schema` (a Struct of the selected columns): a row that does not match (a
 * column renamed by a migration, an int8 too large for a number, a NULL where none is allowed)
 * fails as a DbError naming the statement and the column, instead of travelling on as a lie.
 * Cheap enough for hot paths on small rows (about a microsecond each); used where money and
 * credentials are read.
 */
export const decodeRows = <S extends Schema.Decoder<unknown>>(schema: S, statement: string) => {
  const decode = Schema.decodeUnknownExit(schema)
  return (rows: ReadonlyArray<unknown>): Effect.Effect<Array<S["Type"]>, DbError> => {
    const out: Array<S["Type"]> = []
    for (const row of rows) {
      const exit = decode(row)
      if (Exit.isFailure(exit)) {
        const failure = exit.cause.reasons.find(Cause.isFailReason)
        const detail = failure ? formatIssue(failure.error.issue) : "undecodable row"
        const head = statement.replace(/\s+/g, " ").trim().slice(0, 60)
        return Effect.fail(new DbError({ message: `a row of "${head}" does not match its schema: ${detail}` }))
      }
      out.push(exit.value)
    }
    return Effect.succeed(out)
  }
}

/** `db.query` whose rows are decoded with `schema` (see `decodeRows`). */
export const queryAs = <S extends Schema.Decoder<unknown>>(
  db: DatabaseShape,
  schema: S,
  text: string,
  params?: ReadonlyArray<unknown>,
): Effect.Effect<Array<S["Type"]>, DbError> => Effect.flatMap(db.query(text, params), decodeRows(schema, text))
