/**
 * The webhook subscriber of stored inbound messages: queues one delivery per active webhook of
 * each message inside the storing transaction (one statement per commit), and wakes the worker
 * once that transaction committed (only when it queued something).
 */
import { Effect } from "effect"
import { type MessageSubscriber, wakeIf } from "../ingest/events.ts"
import { WebhookDeliveries } from "./delivery.ts"

export const webhookSubscriber = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const subscriber: MessageSubscriber = {
    stored: (messages) => Effect.map(deliveries.enqueueMany(messages), (n) => wakeIf(n, deliveries.wake)),
  }
  return subscriber
})
