/**
 * The SMS sender: the delivery worker (deliveries.ts) over `sms_deliveries`, because an SMS
 * owes what a webhook owes: survive restarts, never send an attempt twice. The SmsGateway
 * adapter bounds each call (10 s), so the lease covers one call comfortably.
 */
import { Effect } from "effect"
import { SMS_QUEUE, SmsDeliveries } from "../../effects/sms/delivery.ts"
import type { SmsDeliveryRow } from "../../effects/sms/schema.ts"
import { type DeliveryQueue, deliveryWorkerLayer, deliveryWorkerSpec } from "./deliveries.ts"

export const smsQueue = Effect.gen(function*() {
  const deliveries = yield* SmsDeliveries
  const queue: DeliveryQueue<SmsDeliveryRow> = {
    name: SMS_QUEUE,
    table: "sms_deliveries",
    statuses: ["pending"],
    lease: "30 seconds",
    concurrency: 4,
    attempt: deliveries.attempt,
  }
  return queue
})

export const smsWorkerSpec = (onRetry?: (at: Date) => Effect.Effect<void>) => Effect.map(smsQueue, (queue) => deliveryWorkerSpec(queue, onRetry))

export const smsWorkerLayer = deliveryWorkerLayer(smsQueue)
