/**
 * Embedded PostgreSQL (PGlite, Postgres in WASM): the default when DATABASE_URL is unset.
 * PGlite has one connection, so a semaphore of one serialises plain statements and whole
 * transactions: a transaction holds the permit from BEGIN to COMMIT.
 */
import { PGlite } from "@electric-sql/pglite"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { ConnectionSource } from "./connection.ts"
import { byteaInBinary } from "./pg-wire.ts"
import { namedStatements } from "./pglite-statements.ts"
import { isDeno } from "../is-deno.ts"
import { siblingModule } from "../module-url.ts"

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
  /** The database directory itself, unlocked (the first-start child process; see pglite-initdb.ts). */
  readonly pgDir?: string
  /** A `dumpDataDir()` tarball to start from (fast test databases). */
  readonly loadDataDir?: Blob | File
}

/**
 * PGlite files must have one writer: a second process (say the operator CLI while the service
 * runs) would see a stale copy and could corrupt them. A pid lock file refuses that early.
 */
const takeLock = (dataDir: string): (() => void) => {
  const file = path.join(dataDir, "pglite.lock")
  for (let tries = 0; tries < 2; tries++) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: "wx" })
      return () => fs.rmSync(file, { force: true })
    } catch {
      const holder = Number(fs.readFileSync(file, "utf8"))
      let alive = false
      try {
        alive = Number.isInteger(holder) && holder > 0 && holder !== process.pid && (process.kill(holder, 0), true)
      } catch { /* no such process: a stale lock */ }
      if (alive) {
        throw new Error(
          `the embedded database in ${dataDir} is in use by process ${holder}; stop that process first, or use DATABASE_URL`,
        )
      }
      fs.rmSync(file, { force: true })
    }
  }
  throw new Error(`cannot lock the embedded database in ${dataDir}`)
}

/**
 * Memory: WebAssembly memory never shrinks, so what PGlite touches once stays resident. 16 MB
 * of shared buffers instead of 128 MB (the OS page cache holds the files anyway) keeps an idle
 * service near 250 MB; see bench/REPORT.md "HTTP API (issue 11)".
 */
const POSTGRESQL_CONF = ["shared_buffers=16MB", "temp_buffers=2MB", "maintenance_work_mem=16MB"].join("\n")

/** Runs initdb and the migrations in a child process (see pglite-initdb.ts); false when that is not possible here. */
const initdbApart = (pgDir: string): Promise<boolean> =>
  new Promise((resolve) => {
    const script = fileURLToPath(siblingModule("./pglite-initdb.ts", import.meta.url))
    const args = isDeno ? ["run", "--allow-read", "--allow-write", "--allow-env", "--allow-sys", script, pgDir] : [script, pgDir]
    try {
      const child = spawn(process.execPath, args, { stdio: "ignore" })
      child.on("error", () => resolve(false))
      child.on("exit", (code) => resolve(code === 0 && fs.existsSync(path.join(pgDir, "PG_VERSION"))))
    } catch {
      resolve(false)
    }
  })

export const openPglite = async (options: PgliteOptions): Promise<{ source: ConnectionSource; pg: PGlite; close: () => Promise<void> }> => {
  const unlock = options.dataDir ? (fs.mkdirSync(path.resolve(options.dataDir), { recursive: true }), takeLock(path.resolve(options.dataDir))) : () => undefined
  const pgDir = options.pgDir ?? (options.dataDir ? path.resolve(options.dataDir, "pg") : undefined)
  // First start: initdb and migrations elsewhere (if that fails, PGlite.create below runs initdb
  // in-process and the caller migrates).
  if (options.dataDir && pgDir && !options.loadDataDir && !fs.existsSync(path.join(pgDir, "PG_VERSION"))) await initdbApart(pgDir)
  const pg = await PGlite.create({
    ...(pgDir ? { dataDir: pgDir } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    parsers,
    postgresqlconf: POSTGRESQL_CONF,
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
  const statements = namedStatements(pg)
  const raw = {
    query: (text: string, params?: ReadonlyArray<unknown>) => statements.query(text, params),
    exec: async (script: string) => void (await pg.exec(script)),
  }
  const source: ConnectionSource = {
    dialect: "pglite",
    bytea: byteaInBinary,
    query: (text, params) => guarded(() => raw.query(text, params)),
    exec: (script) => guarded(() => raw.exec(script)),
    reserve: async () => {
      const release = await lock()
      return { connection: raw, release: async () => release() }
    },
  }
  return {
    source,
    pg,
    close: async () => {
      await pg.close()
      unlock()
    },
  }
}
