/**
 * Retention purge: deletes inbound messages past their `expires_at` (received_at + the address's
 * retention days), at most 1000 per statement so a backlog never holds one huge transaction, and
 * with them their raw MIME and attachments once no message refers to those any more.
 *
 * On the worker pattern, one "job" is one purged batch: claiming expired messages is deleting
 * them (there is nothing left to hand over), so `handle` only reports. A full batch makes the
 * loop go again at once; an empty one waits for RETENTION_INTERVAL.
 */
import { type Duration, Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { purgeMessages } from "../../effects/messages/purge.ts"
import type { Database } from "../../effects/ports/Database.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"
import { BLOB_GARBAGE } from "./blob-garbage.ts"
import { type WorkerSpec, workerLayer } from "./worker.ts"

export const RETENTION_BATCH = 1000

export interface PurgedBatch {
  readonly deleted: number
}

export const retentionWorker = (interval: Duration.Input): WorkerSpec<PurgedBatch, Database | WorkSignals> => ({
  name: "retention",
  batchSize: 1,
  concurrency: 1,
  pollInterval: interval,
  claim: (now) =>
    purgeMessages(
      `SELECT id FROM inbound_messages WHERE expires_at <= $1 ORDER BY expires_at LIMIT ${RETENTION_BATCH} FOR UPDATE SKIP LOCKED`,
      [now],
    ).pipe(Effect.map((deleted) => (deleted > 0 ? [{ deleted }] : []))),
  handle: (batch) =>
    Effect.logInfo("retention: purged expired messages").pipe(
      Effect.annotateLogs({ deleted: batch.deleted }),
      // The purged bodies' files (large mail) go now, not at the next poll.
      Effect.andThen(WorkSignals.use((signals) => signals.notify(BLOB_GARBAGE))),
    ),
})

/** The worker at RETENTION_INTERVAL. */
export const retentionWorkerLayer = Layer.unwrap(
  AppConfig.useSync((config) => workerLayer(retentionWorker(config.retentionInterval))),
)
