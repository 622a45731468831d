/**
 * A fresh, migrated database per test app: a PGlite copy of the template by default, or a
 * private schema on the PostgreSQL server named by TEST_DATABASE_URL (dropped afterwards).
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { inject } from "vitest"
import type { AppConfig } from "../../effects/config.ts"
import { Database, type DbError } from "../../effects/ports/Database.ts"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { pgliteLayer, postgresLayer } from "../../src/db/layer.ts"
import { openPostgres } from "../../src/db/postgres.ts"

export const testDatabaseUrl = process.env.TEST_DATABASE_URL

/** Which engine this run targets (for the rare test that differs, e.g. real concurrency). */
export const onPostgres = testDatabaseUrl !== undefined

export interface TestDatabase {
  readonly layer: Layer.Layer<Database, DbError, AppConfig>
  readonly drop: () => Promise<void>
}

export const testDatabase = (): TestDatabase => {
  if (testDatabaseUrl) {
    const schema = `t_${randomHexSync(6)}`
    const admin = openPostgres({ url: testDatabaseUrl, max: 1 })
    const created = admin.source.query(`CREATE SCHEMA ${schema}`)
    return {
      layer: Layer.unwrap(Effect.promise(() => created.then(() => postgresLayer({ url: testDatabaseUrl, searchPath: schema, max: 10 })))),
      drop: async () => {
        await created.catch(() => undefined)
        await admin.source.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined)
        await admin.close()
      },
    }
  }
  const template = inject("pgliteTemplate")
  const blob = new Blob([fs.readFileSync(template)])
  return { layer: pgliteLayer({ loadDataDir: blob }), drop: async () => undefined }
}

/**
 * A fresh database whose statements through the Database port are appended to `statements` (as
 * sent, or with whitespace collapsed when `collapse`): for tests that pin which statements a path
 * runs.
 */
export const loggedTestDatabase = (statements: Array<string>, options: { readonly collapse?: boolean } = {}): TestDatabase => {
  const inner = testDatabase()
  const layer = Layer.effect(
    Database,
    Effect.gen(function*() {
      const db = yield* Database
      return Database.of({
        ...db,
        query: (text, params) => (statements.push(options.collapse ? text.replace(/\s+/g, " ").trim() : text), db.query(text, params)),
      })
    }),
  ).pipe(Layer.provide(inner.layer))
  return { layer, drop: inner.drop }
}
