/**
 * Removes the files of deleted messages' bodies (effects/ports/MimeBlobs.ts): the keys a deleted MIME
 * row left in `blob_garbage`, at most BLOB_GARBAGE_BATCH per round. Woken by the retention worker
 * after it purged; otherwise it looks every RETENTION_INTERVAL (an address or account deletion
 * leaves its files until then). A full round makes the loop go again at once.
 */
import { type Duration, Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { MimeBlobs } from "../../effects/ports/MimeBlobs.ts"
import { type WorkerSpec, workerLayer } from "./worker.ts"

export const BLOB_GARBAGE_BATCH = 500
export const BLOB_GARBAGE = "blob-garbage"

export const blobGarbageWorker = (interval: Duration.Input): WorkerSpec<{ readonly removed: number }, MimeBlobs> => ({
  name: BLOB_GARBAGE,
  batchSize: 1,
  concurrency: 1,
  pollInterval: interval,
  claim: () =>
    MimeBlobs.use((blobs) => blobs.collect(BLOB_GARBAGE_BATCH)).pipe(
      // One job per full round, so the loop goes again while there is more.
      Effect.map((removed) => (removed >= BLOB_GARBAGE_BATCH ? [{ removed }] : [])),
    ),
  handle: () => Effect.void,
})

/** The worker at RETENTION_INTERVAL; nothing to run without blobs (INGEST_BLOB_BYTES=0). */
export const blobGarbageWorkerLayer = Layer.unwrap(
  AppConfig.useSync((config) => (config.ingestBlobBytes > 0 ? workerLayer(blobGarbageWorker(config.retentionInterval)) : Layer.empty)),
)
