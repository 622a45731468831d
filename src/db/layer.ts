/**
 * The Database layer: PGlite in DATA_DIR by default, PostgreSQL when DATABASE_URL is set.
 * Migrations run before the layer is ready; the connection closes when the runtime shuts down.
 */
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { Database, DbError } from "../../effects/ports/Database.ts"
import { type ConnectionSource, makeDatabase } from "./connection.ts"
import { migrate } from "./migrate.ts"
import { openPglite, type PgliteOptions } from "./pglite.ts"
import { openPostgres, type PostgresOptions } from "./postgres.ts"

/** Opens a source, runs migrations, and closes it with the scope. */
const fromSource = (open: () => Promise<{ source: ConnectionSource; close: () => Promise<void> }>) =>
  Layer.effect(
    Database,
    Effect.gen(function*() {
      const { source } = yield* Effect.acquireRelease(
        Effect.tryPromise({ try: open, catch: (e) => new DbError({ message: e instanceof Error ? e.message : String(e) }) }),
        (opened) => Effect.promise(() => opened.close().catch(() => undefined)),
      )
      const db = Database.of(makeDatabase(source))
      yield* migrate().pipe(Effect.provideService(Database, db), Effect.orDie)
      return db
    }),
  )

export const pgliteLayer = (options: PgliteOptions) => fromSource(() => openPglite(options))
export const postgresLayer = (options: PostgresOptions) => fromSource(async () => openPostgres(options))

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
