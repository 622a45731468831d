/**
 * The webhook subscriber of stored inbound messages: queues one delivery per active webhook
 * inside the storing transaction, and wakes the worker once that transaction committed.
 */
import { Effect } from "effect"
import type { MessageEventsShape } from "../ingest/events.ts"
import { WebhookDeliveries } from "./delivery.ts"

export const webhookSubscriber = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const subscriber: MessageEventsShape = {
    stored: (message) => Effect.asVoid(deliveries.enqueue({ id: message.id, addressId: message.addressId })),
    committed: () => deliveries.wake,
  }
  return subscriber
})
