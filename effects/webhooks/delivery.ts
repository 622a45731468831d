/**
 * Inbox webhook deliveries: queued as rows in the transaction that stored the message, then
 * attempted by the webhook worker (src/workers/webhooks.ts) on the shared delivery machine
 * (deliveries/outbox.ts: lease, take-then-record, retry schedule, 410 deactivation).
 */
import { Clock, Context, Effect, Layer, type Option } from "effect"
import { type Handed, leaseFor, makeHandoff, queueHanded } from "../deliveries/handoff.ts"
import { type Channel, makeAttempts } from "../deliveries/outbox.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { WorkSignals } from "../ports/WorkSignals.ts"
import { randomHex } from "../shared/crypto.ts"
import type { SecretboxError } from "../shared/secretbox.ts"
import { makeSignedPost, type SendOutcome } from "./post.ts"
import type { WebhookDeliveryRow, WebhookRow } from "./schema.ts"
import { WebhookDeliveryOptions } from "./transport.ts"

export { describeOutcome, isDelivered, type SendOutcome } from "./post.ts"

/** WorkSignals queue (and worker) name. */
export const WEBHOOK_QUEUE = "webhooks"
export const MESSAGE_RECEIVED = "inbound.message_received"
export const WEBHOOK_TEST = "webhook.test"
/** Secretbox context of `webhooks.secret_sealed`. */
export const SECRET_CONTEXT = "webhook.secret"

/** The `inbound.message_received` body; rebuilt from the row, so it is byte-identical on every retry. */
export const messageReceivedBody = (row: WebhookDeliveryRow, addressId: number): string =>
  JSON.stringify({
    event: row.event,
    webhook_id: row.webhook_id,
    address_id: addressId,
    message_id: row.message_id,
    timestamp: row.created_at.toISOString(),
  })

export interface WebhookDeliveriesShape {
  /**
   * Queues one `inbound.message_received` delivery per active webhook of the address. Joins the
   * caller's transaction (the one storing the message, or a re-trigger).
   */
  readonly enqueue: (message: { readonly id: number; readonly addressId: number }) => Effect.Effect<ReadonlyArray<WebhookDeliveryRow>, DbError>
  /** `enqueue` for the messages of one ingest commit, in one statement; returns how many deliveries it queued. */
  readonly enqueueMany: (messages: ReadonlyArray<{ readonly id: number; readonly addressId: number }>) => Effect.Effect<number, DbError>
  /**
   * Makes the next attempt of a delivery claimed with lease `job.locked_until` and records it.
   * Returns when the following attempt is due, if one was scheduled.
   */
  readonly attempt: (job: WebhookDeliveryRow) => Effect.Effect<Option.Option<Date>, DbError>
  /** One signed request, now (the test endpoint). */
  readonly send: (webhook: WebhookRow, id: string, body: string) => Effect.Effect<SendOutcome, SecretboxError>
  /** Wakes the worker (after the queuing transaction committed). */
  readonly wake: Effect.Effect<void>
  /**
   * What an ingest commit queues for its stored messages, inside its transaction: their
   * deliveries, taken for this instance's worker when it runs (../deliveries/handoff.ts), else
   * for claiming. Succeeds with what to do once the transaction committed (hand them over, or
   * wake the worker; nothing when nothing was queued).
   */
  readonly queueStored: (messages: ReadonlyArray<{ readonly id: number; readonly addressId: number }>) => Effect.Effect<Effect.Effect<void>, DbError>
  /**
   * The deliveries handed over by commits, each as its attempt (the webhook worker runs them);
   * an attempt returns when the following one is due, if one was scheduled.
   */
  readonly handed: Handed
}

/** A delivery queued taken (migration 036), with the webhook's columns as they were when queued. */
export interface TakenWebhookDelivery extends WebhookDeliveryRow {
  readonly url: string
  readonly secret_sealed: string
  readonly address_id: number
  readonly is_active: boolean
}

const targetOf = (row: TakenWebhookDelivery): WebhookRow =>
  ({ id: row.webhook_id, address_id: row.address_id, url: row.url, secret_sealed: row.secret_sealed, is_active: row.is_active }) as WebhookRow

export class WebhookDeliveries extends Context.Service<WebhookDeliveries, WebhookDeliveriesShape>()("app/WebhookDeliveries") {
  static readonly layer = Layer.effect(
    WebhookDeliveries,
    Effect.gen(function*() {
      const db = yield* Database
      const signals = yield* WorkSignals
      const signed = yield* makeSignedPost

      const channel: Channel<WebhookDeliveryRow, WebhookRow> = {
        name: "WebhookDeliveries",
        table: "webhook_deliveries",
        targetKey: "webhook_id",
        targetTable: "webhooks",
        statuses: { open: ["pending", "retrying"], retrying: "retrying", delivered: "delivered" },
        inactive: "webhook is inactive",
        noAnswer: { status_code: null },
        perform: (job, webhook) => signed.attempt(webhook, SECRET_CONTEXT, String(job.id), messageReceivedBody(job, webhook.address_id)),
        deactivate: (webhook, at) => Effect.asVoid(db.query("UPDATE webhooks SET is_active = false, updated_at = $2 WHERE id = $1", [webhook.id, at])),
      }

      const enqueue = Effect.fn("WebhookDeliveries.enqueue")(function*(message: { id: number; addressId: number }) {
        const at = new Date(Number(yield* Clock.currentTimeMillis))
        return yield* db.query<WebhookDeliveryRow>(
          `INSERT INTO webhook_deliveries (webhook_id, message_id, event, status, attempt, next_attempt_at, created_at)
           SELECT id, $1, $3, 'pending', 0, $4, $4 FROM webhooks WHERE address_id = $2 AND is_active ORDER BY id
           RETURNING *`,
          [message.id, message.addressId, MESSAGE_RECEIVED, at],
        )
      })

      const enqueueMany = Effect.fn("WebhookDeliveries.enqueueMany")(function*(messages: ReadonlyArray<{ id: number; addressId: number }>) {
        if (messages.length === 0) return 0
        const at = new Date(Number(yield* Clock.currentTimeMillis))
        // A function (migration 028) so PGlite keeps its plan: it runs in every ingest commit.
        const [row] = yield* db.query<{ n: number }>(
          "SELECT queue_webhook_deliveries($1, $2, $3::json) AS n",
          [MESSAGE_RECEIVED, at, JSON.stringify(messages.map((m) => ({ id: m.id, address_id: m.addressId })))],
        )
        return Number(row!.n)
      })

      const attempts = yield* makeAttempts(channel)
      const lease = leaseFor((yield* WebhookDeliveryOptions).timeout)
      const handoff = yield* makeHandoff<TakenWebhookDelivery>({
        name: WEBHOOK_QUEUE,
        attempt: (row) => attempts.attemptTaken(row, targetOf(row)),
        untake: attempts.untake,
      })

      const queueStored = (messages: ReadonlyArray<{ id: number; addressId: number }>) =>
        messages.length === 0 ? Effect.succeed(Effect.void) : queueHanded(handoff, lease, {
          taken: (at, leaseEnd) =>
            db.query<TakenWebhookDelivery>(
              "SELECT * FROM queue_webhook_deliveries_taken($1, $2, $3, $4::json)",
              [MESSAGE_RECEIVED, at, leaseEnd, JSON.stringify(messages.map((m) => ({ id: m.id, address_id: m.addressId })))],
            ),
          forClaim: enqueueMany(messages),
          wake: signals.notify(WEBHOOK_QUEUE),
        })

      return WebhookDeliveries.of({
        enqueue,
        enqueueMany,
        queueStored,
        handed: handoff.handed,
        attempt: attempts.attempt,
        send: (webhook, id, body) => signed.post(webhook, SECRET_CONTEXT, id, body).pipe(Effect.withSpan("WebhookDeliveries.send")),
        wake: signals.notify(WEBHOOK_QUEUE),
      })
    }),
  )
}

/** A fresh `webhook-id` for requests that are not queued deliveries (the test endpoint). */
export const testDeliveryId = Effect.map(randomHex(8), (h) => `test_${h}`)
