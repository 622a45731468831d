/**
 * Versioned SQL migrations (`src/db/migrations/NNN_name.sql`), applied in order at start-up.
 * Runs in one transaction behind an advisory lock, so two instances starting together apply
 * each migration exactly once; the second waits, then finds nothing left to do.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Database } from "../../effects/ports/Database.ts"

export const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations")

/** An arbitrary constant shared by every instance of this service. */
const MIGRATION_LOCK = 72_550_001

export interface Migration {
  readonly version: string
  readonly sql: string
}

export const loadMigrations = (dir: string = migrationsDir): Array<Migration> =>
  fs.readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ""), sql: fs.readFileSync(path.join(dir, f), "utf8") }))

/** Applies every pending migration; returns the versions applied by this call. */
export const migrate = (migrations: ReadonlyArray<Migration> = loadMigrations()) =>
  Effect.gen(function*() {
    const db = yield* Database
    return yield* db.transaction(Effect.gen(function*() {
      yield* db.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK])
      yield* db.query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
      )
      const done = new Set((yield* db.query<{ version: string }>("SELECT version FROM schema_migrations")).map((r) => r.version))
      const applied: Array<string> = []
      for (const m of migrations) {
        if (done.has(m.version)) continue
        yield* db.exec(m.sql)
        yield* db.query("INSERT INTO schema_migrations (version) VALUES ($1)", [m.version])
        applied.push(m.version)
      }
      return applied
    }))
  }).pipe(Effect.withSpan("db.migrate"))

