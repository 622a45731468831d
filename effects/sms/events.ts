/**
 * The SMS subscriber of stored inbound messages: queues one send per active rule inside the
 * storing transaction, and wakes the worker once that transaction committed (only when it
 * queued something). Re-triggering a message's webhooks does not pass through here, so it never
 * sends an SMS again.
 */
import { Effect } from "effect"
import { type MessageSubscriber, wakeIf } from "../ingest/events.ts"
import { SmsDeliveries } from "./delivery.ts"

export const smsSubscriber = Effect.gen(function*() {
  const deliveries = yield* SmsDeliveries
  const subscriber: MessageSubscriber = {
    subscriptions: "sms_rules",
    stored: (messages) => Effect.map(deliveries.enqueueMany(messages), (n) => wakeIf(n, deliveries.wake)),
  }
  return subscriber
})
