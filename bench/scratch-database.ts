/**
 * A database of its own for one bench run on the PostgreSQL server at `serverUrl` (created empty,
 * dropped with FORCE afterwards), or nothing on the embedded engine.
 */
import { randomHexSync } from "../effects/shared/crypto.ts"
import { openPostgres } from "../src/db/postgres.ts"

export interface ScratchDatabase {
  /** DATABASE_URL for the service; undefined on PGlite. */
  readonly url: string | undefined
  readonly drop: () => Promise<void>
}

export const scratchDatabase = async (engine: "pglite" | "postgres", serverUrl: string, prefix: string): Promise<ScratchDatabase> => {
  if (engine !== "postgres") return { url: undefined, drop: async () => {} }
  const name = `${prefix}_${randomHexSync(4)}`
  const admin = openPostgres({ url: serverUrl, max: 1 })
  await admin.source.query(`CREATE DATABASE ${name}`)
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      await admin.source.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.close()
    },
  }
}
