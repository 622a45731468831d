/**
 * The MimeBlobs port (effects/ports/MimeBlobs.ts) on the filesystem: one file per body under
 * `DATA_DIR/blobs/<last two characters of the key>/<key>`. The prepare step writes it (a spooled
 * message's file is linked, not copied); this adapter reads, removes and sweeps.
 */
import { Clock, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../../effects/config.ts"
import { type BlobPlace, MimeBlobs, noBlobs } from "../../effects/ports/MimeBlobs.ts"
import { Database } from "../../effects/ports/Database.ts"

/** Keys are made here from a time and a transaction id: nothing else may name a file. */
const KEY = /^[0-9a-z]+-[0-9a-f]+$/

/** Files per directory stay few: the key's last two characters name its directory. */
const fileOf = (dir: string, key: string) => {
  if (!KEY.test(key)) throw new Error(`not a blob key: ${JSON.stringify(key)}`)
  return path.join(dir, key.slice(-2), key)
}

const removeFile = (file: string) => fs.promises.rm(file, { force: true })

/** Keys asked about per statement (sweep). */
const SWEEP_CHUNK = 500

/** The filesystem adapter over `dir` (created), for bodies of at least `minBytes`. */
export const filesystemBlobs = (dir: string, minBytes: number) =>
  Effect.gen(function*() {
    const db = yield* Database
    yield* Effect.sync(() => fs.mkdirSync(dir, { recursive: true }))

    const placeFor = (id: string, at: number, size: number): BlobPlace | undefined => {
      if (size < minBytes) return undefined
      // The time keeps keys apart across restarts (a transaction id's prefix is random per process).
      const key = `${at.toString(36)}-${id}`
      return { key, path: fileOf(dir, key) }
    }

    const read = (key: string) => Effect.promise(() => fs.promises.readFile(fileOf(dir, key)))

    const readRange = (key: string, start: number, length: number) =>
      Effect.promise(async () => {
        const file = await fs.promises.open(fileOf(dir, key), "r").catch((e: NodeJS.ErrnoException) => {
          if (e.code === "ENOENT") return undefined
          throw e
        })
        if (!file) return undefined
        try {
          const bytes = Buffer.allocUnsafe(length)
          const { bytesRead } = await file.read(bytes, 0, length, start)
          // A file shorter than its row says is not a deletion race: the row and the file disagree.
          if (bytesRead !== length) throw new Error(`blob ${key}: ${bytesRead} bytes at ${start}, expected ${length}`)
          return bytes
        } finally {
          await file.close()
        }
      })

    const discard = (keys: ReadonlyArray<string>) =>
      Effect.promise(() => Promise.all(keys.map((k) => removeFile(fileOf(dir, k))))).pipe(Effect.asVoid)

    const collect = (limit: number) =>
      Effect.gen(function*() {
        // Rows first, files after: a crash between leaves a file no row names, which `sweep` finds.
        const gone = yield* db.query<{ key: string }>(
          `DELETE FROM blob_garbage WHERE key IN (SELECT key FROM blob_garbage ORDER BY key LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING key`,
          [limit],
        )
        yield* discard(gone.map((r) => r.key))
        return gone.length
      })

    /** Every key with its file's last change, directory by directory. */
    const listed = () =>
      fs.promises.readdir(dir, { withFileTypes: true }).then((shards) =>
        Promise.all(
          shards.filter((s) => s.isDirectory()).map(async (s) => {
            const names = await fs.promises.readdir(path.join(dir, s.name))
            return Promise.all(
              names.filter((n) => KEY.test(n)).map(async (n) => {
                const stat = await fs.promises.stat(path.join(dir, s.name, n)).catch(() => undefined)
                return { key: n, changed: stat?.mtimeMs ?? Infinity }
              }),
            )
          }),
        )
      ).then((all) => all.flat())

    const sweep = (before: Date) =>
      Effect.gen(function*() {
        const old = (yield* Effect.promise(listed)).filter((f) => f.changed < before.getTime()).map((f) => f.key)
        let removed = 0
        for (let i = 0; i < old.length; i += SWEEP_CHUNK) {
          const chunk = old.slice(i, i + SWEEP_CHUNK)
          const kept = new Set((yield* db.query<{ body_blob: string }>(
            "SELECT body_blob FROM inbound_mime WHERE body_blob = ANY($1::text[])",
            [chunk],
          )).map((r) => r.body_blob))
          const orphans = chunk.filter((k) => !kept.has(k))
          yield* discard(orphans)
          removed += orphans.length
        }
        return removed
      })

    return MimeBlobs.of({ placeFor, read, readRange, discard, collect, sweep })
  })

/**
 * `DATA_DIR/blobs` when INGEST_BLOB_BYTES is above 0. Files left by an earlier run that no row
 * names are swept in the background at start: on PGlite, which one process owns, everything
 * written before this start (less 100 ms); with a PostgreSQL server, where another instance may
 * be between its write and its commit, only what is an hour older.
 */
export const mimeBlobsLayer = Layer.effect(
  MimeBlobs,
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (config.ingestBlobBytes <= 0) return MimeBlobs.of(noBlobs)
    const blobs = yield* filesystemBlobs(path.join(config.dataDir, "blobs"), config.ingestBlobBytes)
    const now = Number(yield* Clock.currentTimeMillis)
    // A margin on PGlite too: file times come from the kernel's coarse clock, up to a tick
    // (1–10 ms) behind ours, and a body written just after this start must never look older.
    const before = new Date(now - (config.databaseUrl._tag === "None" ? 100 : 60 * 60 * 1000))
    yield* Effect.forkScoped(
      blobs.sweep(before).pipe(
        Effect.tap((n) => (n > 0 ? Effect.logInfo("blobs: removed bodies of batches that never committed").pipe(Effect.annotateLogs({ removed: n })) : Effect.void)),
        Effect.catchCause((cause) => Effect.logWarning("blobs: the start-up sweep failed", cause)),
      ),
    )
    return blobs
  }),
)
