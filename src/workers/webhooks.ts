/**
 * The webhook dispatchers: the delivery worker (deliveries.ts) over `webhook_deliveries` (inbox
 * webhooks) and over `event_deliveries` (account event endpoints). Each
 * attempt mostly waits on a receiver; several at once keep one slow receiver from holding up the
 * rest.
 */
import { Effect } from "effect"
import { WEBHOOK_QUEUE, WebhookDeliveries } from "../../effects/webhooks/delivery.ts"
import type { EventDeliveryRow } from "../../effects/webhooks/endpoint-schema.ts"
import { EVENT_QUEUE, EventDeliveries } from "../../effects/webhooks/event-deliveries.ts"
import type { WebhookDeliveryRow } from "../../effects/webhooks/schema.ts"
import { WebhookDeliveryOptions } from "../../effects/webhooks/transport.ts"
import { type DeliveryQueue, deliveryWorkerLayer, deliveryWorkerSpec, leaseFor } from "./deliveries.ts"

// The agent worker imports these from here; they live with the delivery worker now.
export { leaseFor, makeWakeups, wakeForEarliest } from "./deliveries.ts"

export const webhookQueue = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const options = yield* WebhookDeliveryOptions
  const queue: DeliveryQueue<WebhookDeliveryRow> = {
    name: WEBHOOK_QUEUE,
    table: "webhook_deliveries",
    statuses: ["pending", "retrying"],
    lease: leaseFor(options.timeout),
    concurrency: 8,
    attempt: deliveries.attempt,
  }
  return queue
})

/** The worker's spec; tests drive it with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const webhookWorkerSpec = (onRetry?: (at: Date) => Effect.Effect<void>) =>
  Effect.map(webhookQueue, (queue) => deliveryWorkerSpec(queue, onRetry))

export const webhookWorkerLayer = deliveryWorkerLayer(webhookQueue)

/** Deliveries to account event endpoints: the same worker over `event_deliveries`. */
export const eventQueue = Effect.gen(function*() {
  const deliveries = yield* EventDeliveries
  const options = yield* WebhookDeliveryOptions
  const queue: DeliveryQueue<EventDeliveryRow> = {
    name: EVENT_QUEUE,
    table: "event_deliveries",
    statuses: ["pending", "retrying"],
    lease: leaseFor(options.timeout),
    concurrency: 8,
    attempt: deliveries.attempt,
  }
  return queue
})

export const eventWorkerSpec = (onRetry?: (at: Date) => Effect.Effect<void>) =>
  Effect.map(eventQueue, (queue) => deliveryWorkerSpec(queue, onRetry))

export const eventWorkerLayer = deliveryWorkerLayer(eventQueue)
