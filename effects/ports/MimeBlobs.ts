/**
 * The MimeBlobs port: where the body of a large received message is kept when it is not in its
 * database row (migration 033). On the embedded engine every byte stored goes through PGlite's
 * WebAssembly and its file layer, page by page, on the one thread every statement waits for; a
 * 100 KiB message's raw MIME was half of what its batch moved there (bench/REPORT.md, MX ingest).
 * A message of at least INGEST_BLOB_BYTES keeps its body (the bytes as received, without the
 * trace) in the store, and its MIME row keeps the key and the trace; reading the raw MIME puts the
 * two together again.
 *
 * The life of a body, whatever the adapter:
 * - Written by the prepare step (effects/ingest/prepare.ts, on a prepare thread) to the place
 *   `placeFor` named, before the message's batch commits: a 250 still means every byte is where it
 *   will be read from.
 * - Discarded at once when its message was refused (nothing stored); after a crash between the
 *   write and the commit it is an orphan, which `sweep` removes.
 * - When its MIME row is deleted, by whatever path (retention, address or account deletion and
 *   their cascades), a trigger leaves the key in `blob_garbage` in the same transaction, and
 *   `collect` removes the bodies (the blob-garbage worker, src/workers/blob-garbage.ts).
 *
 * The live adapter keeps files in `DATA_DIR/blobs` (src/providers/blob-files.ts); object storage
 * would be another.
 */
import { Context, Effect } from "effect"
import type { DbError } from "./Database.ts"

/** Where one message's body goes: the key its MIME row keeps and the file. */
export interface BlobPlace {
  readonly key: string
  readonly path: string
}

export interface MimeBlobsShape {
  /**
   * Where the body of a message of `size` bytes, received at `at` (ms) with transaction id `id`,
   * goes; undefined: in its row.
   */
  readonly placeFor: (id: string, at: number, size: number) => BlobPlace | undefined
  /** A stored body's bytes (a missing file is a defect: the row promises it). */
  readonly read: (key: string) => Effect.Effect<Buffer>
  /**
   * `length` bytes of a stored body from `start` (a message's text kept in its body, ../messages/blob-text.ts);
   * undefined when the file is gone: its message was deleted after the caller read its row.
   */
  readonly readRange: (key: string, start: number, length: number) => Effect.Effect<Buffer | undefined>
  /** Removes the files of bodies that were never stored; a missing file is fine. */
  readonly discard: (keys: ReadonlyArray<string>) => Effect.Effect<void>
  /** Removes up to `limit` files of deleted MIME rows (blob_garbage); returns how many keys it took. */
  readonly collect: (limit: number) => Effect.Effect<number, DbError>
  /**
   * Removes files last changed before `before` that no MIME row names (bodies written for a batch
   * that never committed: a crash between the two). Returns how many it removed.
   */
  readonly sweep: (before: Date) => Effect.Effect<number, DbError>
}

/** No blobs: every body in its row (nothing to read, collect or sweep). */
export const noBlobs: MimeBlobsShape = {
  placeFor: () => undefined,
  read: (key) => Effect.die(new Error(`no blob store, yet a row names blob ${key}`)),
  readRange: (key) => Effect.die(new Error(`no blob store, yet a row names blob ${key}`)),
  discard: () => Effect.void,
  collect: () => Effect.succeed(0),
  sweep: () => Effect.succeed(0),
}

export class MimeBlobs extends Context.Service<MimeBlobs, MimeBlobsShape>()("app/MimeBlobs") {}
