/**
 * The webhook dispatcher: an actor over `webhook_deliveries` on the foundation's worker pattern.
 *
 * Why it looks like this: deliveries must survive restarts and run on several instances, so
 * the queue is the table (claimed with SKIP LOCKED under a lease longer than one attempt can
 * take), and the attempt bookkeeping lives in WebhookDeliveries.attempt. Retries are due 1 s and
 * 3 s after a failure; polling alone would add up to a poll interval to each, so the instance
 * that scheduled a retry also sets a wake-up for its due time (fibers in the layer's scope, gone
 * at shutdown; another instance still finds the row by polling).
 */
import { Clock, Duration, Effect, Layer, Option } from "effect"
import { Database } from "../../effects/ports/Database.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"
import { WEBHOOK_QUEUE, WebhookDeliveries } from "../../effects/webhooks/delivery.ts"
import type { WebhookDeliveryRow } from "../../effects/webhooks/schema.ts"
import { WebhookDeliveryOptions } from "../../effects/webhooks/transport.ts"
import { claimDue, runWorker, supervised, type WorkerSpec } from "./worker.ts"

/** Wakes worker `queue` at a given time; the sleeping fibers belong to the caller's scope. */
export const makeWakeups = (queue: string) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const signals = yield* WorkSignals
    return (at: Date) =>
      Effect.gen(function*() {
        const delay = Math.max(0, at.getTime() - Number(yield* Clock.currentTimeMillis))
        yield* Effect.forkIn(Effect.andThen(Effect.sleep(Duration.millis(delay)), signals.notify(queue)), scope)
      })
  })

/**
 * At start-up, a wake-up for the earliest retry already in the table: rows scheduled by an
 * instance that stopped are then attempted on time, not a poll interval late.
 */
export const wakeForEarliest = (wakeAt: (at: Date) => Effect.Effect<void>, table: string, statuses: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const [row] = yield* db.query<{ at: Date | null }>(
      `SELECT min(next_attempt_at) AS at FROM ${table} WHERE status IN (${statuses.map((s) => `'${s}'`).join(", ")})`,
    )
    if (row?.at) yield* wakeAt(row.at)
  }).pipe(Effect.catchCause((cause) => Effect.logWarning(`${table}: cannot look up the next due row`, cause)))

/** A lease comfortably longer than one attempt (the transport's deadline). */
export const leaseFor = (timeout: Duration.Input): Duration.Duration =>
  Duration.max(Duration.times(Duration.fromInputUnsafe(timeout), 3), Duration.seconds(1))

/** The worker's spec; tests drive it with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const webhookWorkerSpec = (onRetry: (at: Date) => Effect.Effect<void> = () => Effect.void) =>
  Effect.gen(function*() {
    const deliveries = yield* WebhookDeliveries
    const options = yield* WebhookDeliveryOptions
    const spec: WorkerSpec<WebhookDeliveryRow> = {
      name: WEBHOOK_QUEUE,
      claim: claimDue<WebhookDeliveryRow>({
        table: "webhook_deliveries",
        dueColumn: "next_attempt_at",
        statuses: ["pending", "retrying"],
        lease: leaseFor(options.timeout),
      }),
      handle: (job) => Effect.flatMap(deliveries.attempt(job), Option.match({ onNone: () => Effect.void, onSome: onRetry })),
      pollInterval: "2 seconds",
      // Each attempt mostly waits on a receiver; several at once keep one slow receiver from holding up the rest.
      concurrency: 8,
    }
    return spec
  })

export const webhookWorkerLayer = Layer.effectDiscard(Effect.gen(function*() {
  const wakeAt = yield* makeWakeups(WEBHOOK_QUEUE)
  const spec = yield* webhookWorkerSpec(wakeAt)
  yield* wakeForEarliest(wakeAt, "webhook_deliveries", ["pending", "retrying"])
  yield* Effect.forkScoped(supervised(spec.name, runWorker(spec)))
}))
