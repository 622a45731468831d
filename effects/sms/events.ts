/**
 * The SMS subscriber of stored inbound messages: queues one send per active rule inside the
 * storing transaction, and wakes the worker once that transaction committed. Re-triggering a
 * message's webhooks does not pass through here, so it never sends an SMS again.
 */
import { Effect } from "effect"
import type { MessageEventsShape } from "../ingest/events.ts"
import { SmsDeliveries } from "./delivery.ts"

export const smsSubscriber = Effect.gen(function*() {
  const deliveries = yield* SmsDeliveries
  const subscriber: MessageEventsShape = {
    stored: (message) => Effect.asVoid(deliveries.enqueue(message)),
    committed: () => deliveries.wake,
  }
  return subscriber
})
