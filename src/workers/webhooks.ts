/**
 * The webhook dispatchers: the delivery worker (deliveries.ts) over `webhook_deliveries` (inbox
 * webhooks) and over `event_deliveries` (account event endpoints). Each
 * attempt mostly waits on a receiver; several at once keep one slow receiver from holding up the
 * rest.
 */
import type { Handed } from "../../effects/deliveries/handoff.ts"
import { WEBHOOK_QUEUE, WebhookDeliveries } from "../../effects/webhooks/delivery.ts"
import type { EventDeliveryRow } from "../../effects/webhooks/endpoint-schema.ts"
import { EVENT_QUEUE, EventDeliveries } from "../../effects/webhooks/event-deliveries.ts"
import type { WebhookDeliveryRow } from "../../effects/webhooks/schema.ts"
import { WebhookDeliveryOptions } from "../../effects/webhooks/transport.ts"
import { type DeliveryQueue, deliveryWorker, leaseFor } from "./deliveries.ts"

/**
 * Both post to receivers: the receiver timeout sets the lease. 32 at once: a slow receiver holds
 * up none of the rest, and every attempt's own database steps (take, record) wait their turn
 * behind ingest commits, most on PGlite, whose thread runs one statement at a time. With 8, at 200
 * messages/s on PGlite the deliveries fell behind by seconds; with 32, p50 25–29 ms
 * (bench/REPORT.md, MX ingest).
 */
const receiverQueue = <J>(name: string, table: string, attempt: DeliveryQueue<J>["attempt"], handed: Handed) =>
  WebhookDeliveryOptions.useSync((options): DeliveryQueue<J> => ({
    name,
    table,
    statuses: ["pending", "retrying"],
    lease: leaseFor(options.timeout),
    concurrency: 32,
    pollInterval: options.pollInterval,
    attempt,
    handed,
  }))

// Both are handed over by the ingest commits that queue them (effects/deliveries/handoff.ts).
const webhooks = deliveryWorker(
  WebhookDeliveries.use((d) => receiverQueue<WebhookDeliveryRow>(WEBHOOK_QUEUE, "webhook_deliveries", d.attempt, d.handed)),
)
const events = deliveryWorker(EventDeliveries.use((d) => receiverQueue<EventDeliveryRow>(EVENT_QUEUE, "event_deliveries", d.attempt, d.handed)))

/** The workers' specs; tests drive them with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const webhookWorkerSpec = webhooks.spec
export const eventWorkerSpec = events.spec

export const webhookWorkerLayer = webhooks.layer
/** Deliveries to account event endpoints: the same worker over `event_deliveries`. */
export const eventWorkerLayer = events.layer
