/**
 * Outbound crash recovery: an actor over `outbound_messages` on the foundation's worker pattern.
 *
 * Why it exists: a send is charged and written as `queued` (the outbox) before the provider is
 * called, under a lease (DISPATCH_LEASE). Normally the request itself dispatches and records the
 * outcome well within the lease; if the process died in between, the row stays queued and,
 * once the lease has passed, this worker takes it (SKIP LOCKED, a new lease, one more attempt)
 * and dispatches it rebuilt from the tables. Delivery is at least once: a crash after the
 * provider took the message but before the answer was recorded sends it again. After
 * MAX_DISPATCH_ATTEMPTS the message is failed and refunded instead. It also purges
 * Idempotency-Keys past their 24 h.
 */
import { Duration, Effect, Layer } from "effect"
import { DISPATCH_LEASE, OutboundDispatcher } from "../../effects/outbound/dispatch.ts"
import { purgeKeys } from "../../effects/outbound/idempotency.ts"
import type { OutboundMessageRow } from "../../effects/outbound/schema.ts"
import { messagesByIds } from "../../effects/outbound/store.ts"
import { Database } from "../../effects/ports/Database.ts"
import { runWorker, supervised, type WorkerSpec } from "./worker.ts"

export const OUTBOUND_QUEUE = "outbound"

export const outboundWorkerSpec = Effect.gen(function*() {
  const db = yield* Database
  const dispatcher = yield* OutboundDispatcher
  const leaseMs = Duration.toMillis(DISPATCH_LEASE)
  const spec: WorkerSpec<OutboundMessageRow, Database> = {
    name: OUTBOUND_QUEUE,
    claim: (now, limit) =>
      Effect.gen(function*() {
        yield* purgeKeys(db, now)
        const taken = yield* db.query<{ id: number }>(
          `UPDATE outbound_messages SET locked_until = $2, attempts = attempts + 1
            WHERE id IN (
              SELECT id FROM outbound_messages
               WHERE status = 'queued' AND (locked_until IS NULL OR locked_until <= $1)
               ORDER BY locked_until, id
               LIMIT $3
               FOR UPDATE SKIP LOCKED)
           RETURNING id`,
          [now, new Date(now.getTime() + leaseMs), limit],
        )
        return yield* messagesByIds(db, taken.map((r) => r.id))
      }),
    handle: (message) =>
      dispatcher.recover(message).pipe(
        Effect.tap((d) =>
          Effect.logInfo("outbound: re-dispatched a message left queued").pipe(
            Effect.annotateLogs({ outbound_message_id: message.id, attempt: message.attempts, status: d.message.status }),
          )
        ),
      ),
    pollInterval: "30 seconds",
    concurrency: 4,
  }
  return spec
})

export const outboundWorkerLayer = Layer.effectDiscard(Effect.gen(function*() {
  const spec = yield* outboundWorkerSpec
  yield* Effect.forkScoped(supervised(spec.name, runWorker(spec)))
}))
