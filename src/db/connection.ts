/**
 * Builds the Database port from a driver-specific connection source. Both adapters share this:
 * the ambient-transaction rule (a transaction's connection travels in a fiber-local Reference,
 * so any service's `query` inside `transaction(...)` joins it) and the error normalisation.
 */
import { Context, Effect, Exit, Option } from "effect"
import { type Connection, type DatabaseShape, DbError, type Row } from "../../effects/ports/Database.ts"

/** A connection reserved for one transaction; `release` hands it back. */
export interface Reserved {
  readonly connection: Connection & { readonly exec: (script: string) => Promise<void> }
  readonly release: () => Promise<void>
}

export interface ConnectionSource {
  readonly dialect: DatabaseShape["dialect"]
  readonly bytea: DatabaseShape["bytea"]
  /** Runs a statement outside any transaction. */
  readonly query: (text: string, params?: ReadonlyArray<unknown>) => Promise<Array<Row>>
  readonly exec: (script: string) => Promise<void>
  /** Takes a connection for a transaction's exclusive use. */
  readonly reserve: () => Promise<Reserved>
}

type TxConnection = Reserved["connection"] & {
  /** Set when a statement of the transaction changed credentials; its commit then settles them. */
  wroteCredentials: boolean
  /** Write watchers a statement of the transaction touched; called again after its commit. */
  readonly touched: Set<() => void>
}

/** A write statement's target tables, as `watchWrites` matches them. */
const WRITE = /^\s*(?:WITH|INSERT|UPDATE|DELETE|TRUNCATE)\b/i
/** Statement texts whose watcher matches are remembered (see `hitsOf`). */
const MAX_MATCHED_TEXTS = 2_000
const writesTo = (tables: ReadonlyArray<string>): RegExp =>
  new RegExp(`\\b(?:INSERT\\s+INTO|UPDATE|DELETE\\s+FROM|TRUNCATE(?:\\s+TABLE)?)\\s+(?:ONLY\\s+)?(?:${tables.join("|")})\\b`, "i")

/**
 * Statements that change what authentication depends on (the columns the triggers of
 * 023_auth_changes.sql watch). After one commits, the write waits until every instance has
 * dropped its cached principals (AuthChanges.settle), whoever made it: the API, the operator
 * CLI, a test. `last_used_at` and profile or verification fields do not match.
 */
const CREDENTIAL_WRITE =
  /\bDELETE\s+FROM\s+(?:api_keys|users)\b|\bUPDATE\s+(?:api_keys|users)\b[\s\S]*?\b(?:revoked_at|expires_at|scopes|user_id|key_hash|disabled_at)\s*=/i
export const writesCredentials = (text: string): boolean => /^\s*(?:WITH|UPDATE|DELETE)\b/i.test(text) && CREDENTIAL_WRITE.test(text)

export interface DatabaseHooks {
  /** Waits until credential changes committed so far are seen everywhere (set once AuthChanges runs). */
  settleCredentials?: Effect.Effect<void>
}

const CurrentTransaction = Context.Reference<Option.Option<TxConnection>>("app/Database/CurrentTransaction", {
  defaultValue: () => Option.none(),
})

/** Turns a driver error into a DbError that keeps the SQLSTATE (never its text for users). */
export const toDbError = (e: unknown): DbError => {
  const err = e as { message?: string; code?: string; constraint?: string; constraint_name?: string }
  return new DbError({
    message: err?.message ?? String(e),
    code: typeof err?.code === "string" ? err.code : undefined,
    constraint: err?.constraint ?? err?.constraint_name,
  })
}

export const makeDatabase = (source: ConnectionSource, hooks: DatabaseHooks = {}): DatabaseShape => {
  const run = (conn: Connection, text: string, params?: ReadonlyArray<unknown>) =>
    Effect.tryPromise({ try: () => conn.query(text, params), catch: toDbError })

  const watchers: Array<{ readonly pattern: RegExp; readonly changed: () => void }> = []
  /**
   * The watchers each statement text writes to. Texts are the code's constants (a few hundred),
   * so the regular expressions run once per text, not on every query (they showed in the HTTP
   * API's allocation profile); texts past the bound are matched each time.
   */
  const hitsByText = new Map<string, ReadonlyArray<() => void>>()
  const hitsOf = (text: string): ReadonlyArray<() => void> => {
    let hit = hitsByText.get(text)
    if (hit === undefined) {
      hit = WRITE.test(text) ? watchers.filter((w) => w.pattern.test(text)).map((w) => w.changed) : []
      if (hitsByText.size < MAX_MATCHED_TEXTS) hitsByText.set(text, hit)
    }
    return hit
  }
  /** Calls the watchers `text` writes to (now, and after it committed). */
  const watched = <A, E>(text: string, tx: Option.Option<TxConnection>, rows: Effect.Effect<A, E>): Effect.Effect<A, E> => {
    if (watchers.length === 0) return rows
    const hit = hitsOf(text)
    if (hit.length === 0) return rows
    for (const f of hit) f()
    if (Option.isSome(tx)) {
      for (const f of hit) tx.value.touched.add(f)
      return rows
    }
    return Effect.tap(rows, () => Effect.sync(() => hit.forEach((f) => f())))
  }

  const query = <T = Row>(text: string, params?: ReadonlyArray<unknown>) =>
    Effect.flatMap(Effect.service(CurrentTransaction), (tx) => {
      const rows = watched(text, tx, run(Option.isSome(tx) ? tx.value : source, text, params) as Effect.Effect<Array<T>, DbError>)
      if (!hooks.settleCredentials || !writesCredentials(text)) return rows
      if (Option.isSome(tx)) {
        tx.value.wroteCredentials = true
        return rows
      }
      return Effect.tap(rows, () => hooks.settleCredentials!)
    })

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | DbError, R> =>
    Effect.gen(function*() {
      const tx = yield* CurrentTransaction
      if (Option.isSome(tx)) return yield* effect
      return yield* Effect.acquireUseRelease(
          Effect.tryPromise({
            try: async () => {
              const reserved = await source.reserve()
              // BEGIN is not waited for: it goes out with the transaction's first statement (one
              // write and one round trip fewer per transaction on PostgreSQL, where the driver
              // coalesces small writes until the next turn of the event loop). Its outcome is
              // checked before COMMIT; a BEGIN that failed fails the connection's statements too.
              const begun = reserved.connection.query("BEGIN")
              begun.catch(() => undefined)
              return { ...reserved, begun }
            },
            catch: toDbError,
          }),
          (reserved) => {
            const conn: TxConnection = {
              query: reserved.connection.query,
              exec: reserved.connection.exec,
              wroteCredentials: false,
              touched: new Set(),
            }
            return Effect.provideService(effect, CurrentTransaction, Option.some(conn)).pipe(
              Effect.tap(() => Effect.tryPromise({ try: () => reserved.begun, catch: toDbError })),
              Effect.tap(() => run(reserved.connection, "COMMIT")),
              Effect.tap(() => Effect.sync(() => conn.touched.forEach((f) => f()))),
              Effect.tap(() => (conn.wroteCredentials && hooks.settleCredentials ? hooks.settleCredentials : Effect.void)),
            )
          },
          (reserved, exit) =>
            Effect.promise(async () => {
              // COMMIT already ran on success; on failure, defect or interruption roll back.
              if (!Exit.isSuccess(exit)) await reserved.connection.query("ROLLBACK").catch(() => undefined)
              await reserved.release()
            }),
        )
    })

  const exec = (script: string) =>
    Effect.gen(function*() {
      const tx = yield* CurrentTransaction
      const target = Option.getOrElse(tx, () => source)
      yield* Effect.tryPromise({ try: () => target.exec(script), catch: toDbError })
    })

  const watchWrites = (tables: ReadonlyArray<string>, changed: () => void) => {
    watchers.push({ pattern: writesTo(tables), changed })
    hitsByText.clear()
  }

  return { query, transaction, exec, bytea: source.bytea, dialect: source.dialect, watchWrites }
}
