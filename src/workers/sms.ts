/**
 * The SMS sender: the delivery worker (deliveries.ts) over `sms_deliveries`, because an SMS
 * owes what a webhook owes: survive restarts, never send an attempt twice. The SmsGateway
 * adapter bounds each call (10 s), so the lease covers one call comfortably.
 */
import { SMS_QUEUE, SmsDeliveries } from "../../effects/sms/delivery.ts"
import type { SmsDeliveryRow } from "../../effects/sms/schema.ts"
import { type DeliveryQueue, deliveryWorker } from "./deliveries.ts"

const sms = deliveryWorker(SmsDeliveries.useSync((deliveries): DeliveryQueue<SmsDeliveryRow> => ({
  name: SMS_QUEUE,
  table: "sms_deliveries",
  statuses: ["pending"],
  lease: "30 seconds",
  concurrency: 4,
  attempt: deliveries.attempt,
})))

/** The worker's spec; tests drive it with `runOnce`. */
export const smsWorkerSpec = sms.spec

export const smsWorkerLayer = sms.layer
