/**
 * The SMS sender: an actor over `sms_deliveries` on the foundation's worker pattern, built like
 * the webhook dispatcher (durable rows, lease, take-then-record attempts, wake-ups at retry due
 * times) because the same guarantees are owed: survive restarts, never send an attempt twice.
 * The SmsGateway adapter bounds each call (10 s), so the lease covers one call comfortably.
 */
import { Effect, Layer, Option } from "effect"
import { SMS_QUEUE, SmsDeliveries } from "../../effects/sms/delivery.ts"
import type { SmsDeliveryRow } from "../../effects/sms/schema.ts"
import { makeWakeups, wakeForEarliest } from "./webhooks.ts"
import { claimDue, runWorker, supervised, type WorkerSpec } from "./worker.ts"

export const smsWorkerSpec = (onRetry: (at: Date) => Effect.Effect<void> = () => Effect.void) =>
  Effect.gen(function*() {
    const deliveries = yield* SmsDeliveries
    const spec: WorkerSpec<SmsDeliveryRow> = {
      name: SMS_QUEUE,
      claim: claimDue<SmsDeliveryRow>({ table: "sms_deliveries", dueColumn: "next_attempt_at", statuses: ["pending"], lease: "30 seconds" }),
      handle: (job) => Effect.flatMap(deliveries.attempt(job), Option.match({ onNone: () => Effect.void, onSome: onRetry })),
      pollInterval: "2 seconds",
      concurrency: 4,
    }
    return spec
  })

export const smsWorkerLayer = Layer.effectDiscard(Effect.gen(function*() {
  const wakeAt = yield* makeWakeups(SMS_QUEUE)
  const spec = yield* smsWorkerSpec(wakeAt)
  yield* wakeForEarliest(wakeAt, "sms_deliveries", ["pending"])
  yield* Effect.forkScoped(supervised(spec.name, runWorker(spec)))
}))
