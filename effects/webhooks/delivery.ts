/**
 * Webhook deliveries: queued as rows in the transaction that stored the message, then attempted
 * by the webhook worker (src/workers/webhooks.ts), which claims due rows under a lease.
 *
 * Exactly-once per attempt: an attempt is taken (attempt + 1) by a statement conditional on the
 * worker's lease before any request is made, and its outcome is recorded under the same
 * condition. An instance that crashes mid-request has spent that attempt; whoever claims the row
 * after the lease makes the next one, never the same one again.
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { AppConfig } from "../config.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { WorkSignals } from "../ports/WorkSignals.ts"
import { randomHex } from "../shared/crypto.ts"
import { openText, type SecretboxError } from "../shared/secretbox.ts"
import type { WebhookDeliveryRow, WebhookRow } from "./schema.ts"
import { signedHeaders } from "./signing.ts"
import { WebhookDeliveryOptions, WebhookTransport } from "./transport.ts"

/** WorkSignals queue (and worker) name. */
export const WEBHOOK_QUEUE = "webhooks"
export const MESSAGE_RECEIVED = "inbound.message_received"
export const WEBHOOK_TEST = "webhook.test"
/** Secretbox context of `webhooks.secret_sealed`. */
export const SECRET_CONTEXT = "webhook.secret"

/** The result of one request to a webhook URL. */
export type SendOutcome =
  | { readonly _tag: "Answered"; readonly status: number; readonly body: string }
  | { readonly _tag: "Refused"; readonly error: string }
  | { readonly _tag: "Failed"; readonly error: string }

export const isDelivered = (o: SendOutcome): boolean => o._tag === "Answered" && o.status >= 200 && o.status < 300

/** A short, single-line `last_error` (no huge bodies, no control characters). */
export const describeOutcome = (o: SendOutcome): string | null => {
  if (o._tag !== "Answered") return o.error
  if (o.status >= 200 && o.status < 300) return null
  const snippet = o.body.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim().slice(0, 200)
  const what = o.status >= 300 && o.status < 400 ? " (redirects are not followed)" : o.status === 410 ? " Gone (webhook deactivated)" : ""
  return `HTTP ${o.status}${what}${snippet ? `: ${snippet}` : ""}`
}

/** The `inbound.message_received` body; rebuilt from the row, so it is byte-identical on every retry. */
export const messageReceivedBody = (row: WebhookDeliveryRow, addressId: number): string =>
  JSON.stringify({
    event: row.event,
    webhook_id: row.webhook_id,
    address_id: addressId,
    message_id: row.message_id,
    timestamp: row.created_at.toISOString(),
  })

/** Delay before the attempt after `failed` failed attempts: 1 s, 3 s, 9 s … (DECISIONS.md "Webhooks"). */
export const backoff = (failed: number): Duration.Duration => Duration.seconds(Math.pow(3, Math.max(0, failed - 1)))

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
  /** One signed request, now (the worker and the test endpoint). */
  readonly send: (webhook: WebhookRow, id: string, body: string) => Effect.Effect<SendOutcome, SecretboxError>
  /** Wakes the worker (after the queuing transaction committed). */
  readonly wake: Effect.Effect<void>
}

export class WebhookDeliveries extends Context.Service<WebhookDeliveries, WebhookDeliveriesShape>()("app/WebhookDeliveries") {
  static readonly layer = Layer.effect(
    WebhookDeliveries,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const transport = yield* WebhookTransport
      const signals = yield* WorkSignals
      const options = yield* WebhookDeliveryOptions
      const timeout = Duration.fromInputUnsafe(options.timeout)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const enqueue = Effect.fn("WebhookDeliveries.enqueue")(function*(message: { id: number; addressId: number }) {
        const at = yield* now
        return yield* db.query<WebhookDeliveryRow>(
          `INSERT INTO webhook_deliveries (webhook_id, message_id, event, status, attempt, next_attempt_at, created_at)
           SELECT id, $1, $3, 'pending', 0, $4, $4 FROM webhooks WHERE address_id = $2 AND is_active ORDER BY id
           RETURNING *`,
          [message.id, message.addressId, MESSAGE_RECEIVED, at],
        )
      })

      const enqueueMany = Effect.fn("WebhookDeliveries.enqueueMany")(function*(messages: ReadonlyArray<{ id: number; addressId: number }>) {
        if (messages.length === 0) return 0
        const at = yield* now
        const rows = yield* db.query(
          `INSERT INTO webhook_deliveries (webhook_id, message_id, event, status, attempt, next_attempt_at, created_at)
           SELECT w.id, m.id, $1, 'pending', 0, $2, $2
             FROM json_to_recordset($3::json) AS m (id int8, address_id int8) JOIN webhooks w ON w.address_id = m.address_id AND w.is_active
            ORDER BY m.id, w.id
           RETURNING id`,
          [MESSAGE_RECEIVED, at, JSON.stringify(messages.map((m) => ({ id: m.id, address_id: m.addressId })))],
        )
        return rows.length
      })

      const send = Effect.fn("WebhookDeliveries.send")(function*(webhook: WebhookRow, id: string, body: string) {
        const secret = yield* openText(config.secretsKey, webhook.secret_sealed, SECRET_CONTEXT)
        const timestamp = Math.floor(Number(yield* Clock.currentTimeMillis) / 1000)
        const headers = yield* signedHeaders({ secret, id, timestamp, body })
        return yield* transport.post({ url: webhook.url, headers, body, timeout }).pipe(
          Effect.map((r): SendOutcome => ({ _tag: "Answered", status: r.status, body: r.body })),
          Effect.catchTags({
            WebhookTargetRefused: (e) => Effect.succeed<SendOutcome>({ _tag: "Refused", error: e.message }),
            WebhookRequestFailed: (e) => Effect.succeed<SendOutcome>({ _tag: "Failed", error: e.message }),
          }),
        )
      })

      /** Records the outcome of attempt `n`, only while this worker still holds the lease. */
      const record = (job: WebhookDeliveryRow, n: number, fields: {
        status: "retrying" | "delivered" | "failed"
        statusCode: number | null
        error: string | null
        nextAt: Date | null
        deliveredAt: Date | null
      }) =>
        db.query(
          `UPDATE webhook_deliveries
              SET status = $4, status_code = $5, last_error = $6, next_attempt_at = $7, delivered_at = $8, locked_until = NULL
            WHERE id = $1 AND attempt = $2 AND locked_until = $3`,
          [job.id, n, job.locked_until, fields.status, fields.statusCode, fields.error, fields.nextAt, fields.deliveredAt],
        )

      const fail = (job: WebhookDeliveryRow, n: number, error: string, statusCode: number | null = null) =>
        record(job, n, { status: "failed", statusCode, error, nextAt: null, deliveredAt: null }).pipe(Effect.as(Option.none<Date>()))

      const attempt = Effect.fn("WebhookDeliveries.attempt")(function*(job: WebhookDeliveryRow) {
        const max = config.webhookMaxAttempts
        if (job.attempt >= max) {
          // The last attempt was taken by an instance that stopped before recording it.
          return yield* fail(job, job.attempt, "attempt interrupted (instance stopped); no attempts left")
        }
        const [taken] = yield* db.query<{ attempt: number; address_id: number; is_active: boolean } & WebhookRow>(
          `WITH taken AS (
             UPDATE webhook_deliveries SET attempt = attempt + 1
              WHERE id = $1 AND attempt = $2 AND locked_until = $3 AND status IN ('pending', 'retrying')
              RETURNING attempt, webhook_id)
           SELECT taken.attempt, w.* FROM taken JOIN webhooks w ON w.id = taken.webhook_id`,
          [job.id, job.attempt, job.locked_until],
        )
        // Lease lost, row gone, or its webhook deleted (the row goes with it).
        if (!taken) return Option.none<Date>()
        const n = taken.attempt
        if (!taken.is_active) return yield* fail(job, n, "webhook is inactive")

        const outcome = yield* send(taken, String(job.id), messageReceivedBody(job, taken.address_id)).pipe(
          Effect.catchTag("SecretboxError", () =>
            Effect.succeed<SendOutcome>({ _tag: "Refused", error: "webhook secret cannot be decrypted (SECRETS_KEY changed?)" })),
        )
        const at = yield* now
        const statusCode = outcome._tag === "Answered" ? outcome.status : null
        const error = describeOutcome(outcome)
        if (isDelivered(outcome)) {
          yield* record(job, n, { status: "delivered", statusCode, error: null, nextAt: null, deliveredAt: at })
          return Option.none<Date>()
        }
        if (outcome._tag === "Answered" && outcome.status === 410) {
          // The receiver says the endpoint is gone for good: stop sending to it at all.
          return yield* db.transaction(Effect.gen(function*() {
            yield* db.query("UPDATE webhooks SET is_active = false, updated_at = $2 WHERE id = $1", [taken.id, at])
            return yield* fail(job, n, error!, statusCode)
          }))
        }
        if (outcome._tag === "Refused" || n >= max) return yield* fail(job, n, error!, statusCode)
        const nextAt = new Date(at.getTime() + Duration.toMillis(backoff(n)))
        yield* record(job, n, { status: "retrying", statusCode, error, nextAt, deliveredAt: null })
        return Option.some(nextAt)
      })

      return WebhookDeliveries.of({
        enqueue,
        enqueueMany,
        attempt,
        send,
        wake: signals.notify(WEBHOOK_QUEUE),
      })
    }),
  )
}

/** A fresh `webhook-id` for requests that are not queued deliveries (the test endpoint). */
export const testDeliveryId = Effect.map(randomHex(8), (h) => `test_${h}`)
