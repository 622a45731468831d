/**
 * Embedded PostgreSQL (PGlite, Postgres in WASM): the default when DATABASE_URL is unset.
 * PGlite has one connection, so a semaphore of one serialises plain statements and whole
 * transactions: a transaction holds the permit from BEGIN to COMMIT.
 */
import { PGlite } from "@electric-sql/pglite"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Row } from "../../effects/ports/Database.ts"
import type { ConnectionSource } from "./connection.ts"

/** int8 as number (ids, money) and `date` as its YYYY-MM-DD text, same as the postgres adapter. */
const parsers = { 20: (v: string) => Number(v), 1082: (v: string) => v }

/** A tiny FIFO mutex (no Effect here: it guards a Promise-based driver). */
const mutex = () => {
  let tail = Promise.resolve()
  return (): Promise<() => void> => {
    let release!: () => void
    const next = new Promise<void>((r) => (release = r))
    const ready = tail.then(() => release)
    tail = tail.then(() => next)
    return ready
  }
}

export interface PgliteOptions {
  /** Directory for the files; undefined keeps the database in memory (tests). */
  readonly dataDir?: string
  /** A `dumpDataDir()` tarball to start from (fast test databases). */
  readonly loadDataDir?: Blob | File
}

export const openPglite = async (options: PgliteOptions): Promise<{ source: ConnectionSource; pg: PGlite; close: () => Promise<void> }> => {
  if (options.dataDir) fs.mkdirSync(path.resolve(options.dataDir), { recursive: true })
  const pg = await PGlite.create({
    ...(options.dataDir ? { dataDir: path.resolve(options.dataDir, "pg") } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    parsers,
  })
  const lock = mutex()
  const guarded = async <T>(f: () => Promise<T>): Promise<T> => {
    const release = await lock()
    try {
      return await f()
    } finally {
      release()
    }
  }
  const raw = {
    query: async (text: string, params?: ReadonlyArray<unknown>) => (await pg.query<Row>(text, params as Array<unknown>)).rows,
    exec: async (script: string) => void (await pg.exec(script)),
  }
  const source: ConnectionSource = {
    dialect: "pglite",
    query: (text, params) => guarded(() => raw.query(text, params)),
    exec: (script) => guarded(() => raw.exec(script)),
    reserve: async () => {
      const release = await lock()
      return { connection: raw, release: async () => release() }
    },
  }
  return { source, pg, close: () => pg.close() }
}
