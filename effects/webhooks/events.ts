/**
 * The webhook subscriber of stored inbound messages: queues one delivery per active webhook of
 * each message inside the storing transaction (one statement per commit), and wakes the worker
 * once that transaction committed.
 */
import { Effect } from "effect"
import type { MessageSubscriber } from "../ingest/events.ts"
import { WebhookDeliveries } from "./delivery.ts"

export const webhookSubscriber = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const subscriber: MessageSubscriber = {
    stored: (messages) => Effect.asVoid(deliveries.enqueueMany(messages)),
    committed: () => deliveries.wake,
  }
  return subscriber
})
