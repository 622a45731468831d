/**
 * The Database layer: PGlite in DATA_DIR by default, PostgreSQL when DATABASE_URL is set.
 * Migrations run before the layer is ready; the connection closes when the runtime shuts down.
 * It also provides AuthChanges (effects/auth/changes.ts) for the same schema: how this process
 * learns of credential changes made anywhere; and on PGlite's thread under Node, PrepareHost
 * (src/ingest/prepare-host.ts): that thread prepares received mail too.
 */
import { Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { AuthChanges } from "../../effects/auth/changes.ts"
import { Database, DbError } from "../../effects/ports/Database.ts"
import { type OpenedChanges, pgliteAuthChanges, postgresAuthChanges } from "./auth-changes.ts"
import { type ConnectionSource, type DatabaseHooks, makeDatabase } from "./connection.ts"
import { migrate } from "./migrate.ts"
import type { PgliteOptions } from "./pglite.ts"
import { openPgliteThread } from "./pglite-thread.ts"
import { openPostgres, type PostgresOptions } from "./postgres.ts"
import { PrepareHost, type PrepareHostShape } from "../ingest/prepare-host.ts"
import { isDeno } from "../is-deno.ts"

interface Opened {
  readonly source: ConnectionSource
  readonly close: () => Promise<void>
  /** Starts listening for credential changes in `schema` (after migrations created the triggers). */
  readonly listen: (schema: string) => Promise<OpenedChanges>
  /** A thread of the database's that may also prepare received mail (PGlite's own). */
  readonly prepareHost?: PrepareHostShape
}

const dbError = (e: unknown) => new DbError({ message: e instanceof Error ? e.message : String(e) })

/** Opens a source, runs migrations, starts the change listener; all closed with the scope. */
const fromSource = (open: () => Promise<Opened>) =>
  Layer.effectContext(
    Effect.gen(function*() {
      const opened = yield* Effect.acquireRelease(
        Effect.tryPromise({ try: open, catch: dbError }),
        (o) => Effect.promise(() => o.close().catch(() => undefined)),
      )
      const hooks: DatabaseHooks = {}
      const db = Database.of(makeDatabase(opened.source, hooks))
      yield* migrate().pipe(Effect.provideService(Database, db), Effect.orDie)
      const [{ schema }] = (yield* db.query<{ schema: string }>("SELECT current_schema() AS schema")) as [{ schema: string }]
      const changes = yield* Effect.acquireRelease(
        Effect.tryPromise({ try: () => opened.listen(schema), catch: dbError }),
        (c) => Effect.promise(() => c.close()),
      )
      // From now on a write to credentials returns once every instance has seen it.
      hooks.settleCredentials = changes.changes.settle
      const context = Context.make(Database, db).pipe(Context.add(AuthChanges, AuthChanges.of(changes.changes)))
      return opened.prepareHost ? Context.add(context, PrepareHost, opened.prepareHost) : context
    }),
  )

/**
 * PGlite on a thread of its own (./pglite-thread.ts), or on the event loop (`thread: false`:
 * tools and tests that want one thread).
 */
export const pgliteLayer = (options: PgliteOptions & { readonly thread?: boolean }) =>
  fromSource(async () => {
    const { thread = true, ...opts } = options
    if (thread) {
      const opened = await openPgliteThread(opts)
      return {
        source: opened.source,
        close: opened.close,
        listen: (schema) => pgliteAuthChanges(opened.listen, schema),
        // Not on Deno: there one-message sessions to 20 accounts went 451 → 356 and 390 msgs/s with
        // it (2 interleaved pairs), where Node gains (src/ingest/prepare-host.ts).
        ...(isDeno ? {} : { prepareHost: { openPort: opened.preparePort } }),
      }
    }
    // Loaded only here: on its thread the event loop never loads PGlite's module (~20 MB resident).
    const { openPglite } = await import("./pglite.ts")
    const { source, pg, close } = await openPglite(opts)
    return { source, close, listen: (schema) => pgliteAuthChanges((channel, onPayload) => pg.listen(channel, onPayload), schema) }
  })

export const postgresLayer = (options: PostgresOptions) =>
  fromSource(async () => {
    const { source, close } = openPostgres(options)
    return { source, close, listen: (schema) => postgresAuthChanges(options.url, schema) }
  })

/** Chooses the adapter from the settings. */
export const databaseLayer = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    return Option.match(config.databaseUrl, {
      onNone: () => pgliteLayer({ dataDir: config.dataDir }),
      onSome: (url) => postgresLayer({ url }),
    })
  }),
)
