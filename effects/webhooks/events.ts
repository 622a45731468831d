/**
 * The webhook subscribers of stored inbound messages: inbox webhooks of the message's address,
 * and the account's event endpoints subscribed to `inbound.message_received`. Each queues its
 * deliveries inside the storing transaction, and wakes its worker once that transaction committed.
 */
import { Effect } from "effect"
import type { MessageEventsShape } from "../ingest/events.ts"
import { WebhookDeliveries } from "./delivery.ts"
import { EventDeliveries } from "./event-deliveries.ts"

export const webhookSubscriber = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const subscriber: MessageEventsShape = {
    stored: (message) => Effect.asVoid(deliveries.enqueue({ id: message.id, addressId: message.addressId })),
    committed: () => deliveries.wake,
  }
  return subscriber
})

export const endpointSubscriber = Effect.gen(function*() {
  const deliveries = yield* EventDeliveries
  const subscriber: MessageEventsShape = {
    stored: (message) => Effect.asVoid(deliveries.emitInbound({ id: message.id, userId: message.userId, addressId: message.addressId })),
    committed: () => deliveries.wake,
  }
  return subscriber
})
