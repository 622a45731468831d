/**
 * A database that outlives one test app, for restart tests: stop an app mid-work, start a new
 * one on the same data. PGlite: a temp `dataDir` seeded from the migrated template (the first
 * app loads the template, later ones open the files). PostgreSQL: a private schema kept until
 * `drop`. Pass `next()` as `makeTestApp({ database })` for each app.
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { pgliteLayer, postgresLayer } from "../../src/db/layer.ts"
import { openPostgres } from "../../src/db/postgres.ts"
import { type TestDatabase, testDatabaseUrl } from "./db.ts"

export interface RestartableDatabase {
  /** The database for the next app (each app opens it anew). */
  readonly next: () => TestDatabase
  readonly drop: () => Promise<void>
}

export const restartableDatabase = (): RestartableDatabase => {
  const keep = async () => undefined
  if (testDatabaseUrl) {
    const url = testDatabaseUrl
    const schema = `t_${randomHexSync(6)}`
    const admin = openPostgres({ url, max: 1 })
    const created = admin.source.query(`CREATE SCHEMA ${schema}`)
    return {
      next: () => ({
        layer: Layer.unwrap(Effect.promise(() => created.then(() => postgresLayer({ url, searchPath: schema, max: 10 })))),
        drop: keep,
      }),
      drop: async () => {
        await created.catch(() => undefined)
        await admin.source.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined)
        await admin.close()
      },
    }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pg-restart-"))
  let opened = 0
  return {
    next: () => {
      const first = opened++ === 0
      const loadDataDir = first ? new Blob([fs.readFileSync(inject("pgliteTemplate"))]) : undefined
      return { layer: pgliteLayer({ dataDir: dir, ...(loadDataDir ? { loadDataDir } : {}) }), drop: keep }
    },
    drop: async () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}
