/**
 * The webhook subscribers of stored inbound messages: inbox webhooks of the message's address,
 * and the account's event endpoints subscribed to `inbound.message_received`. Each queues its
 * deliveries inside the storing transaction (one statement per commit), and once that transaction
 * committed hands them to its worker (../deliveries/handoff.ts) or wakes it (only when it queued
 * something).
 */
import { Effect } from "effect"
import type { MessageSubscriber } from "../ingest/events.ts"
import { WebhookDeliveries } from "./delivery.ts"
import { EventDeliveries } from "./event-deliveries.ts"

export const webhookSubscriber = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const subscriber: MessageSubscriber = {
    subscriptions: "webhooks",
    stored: deliveries.queueStored,
  }
  return subscriber
})

export const endpointSubscriber = Effect.gen(function*() {
  const deliveries = yield* EventDeliveries
  const subscriber: MessageSubscriber = {
    subscriptions: "event_endpoints",
    stored: deliveries.queueInbound,
  }
  return subscriber
})
