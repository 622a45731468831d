/**
 * Webhooks: per-address HTTP endpoints that receive signed events when mail arrives
 * (SPEC.md "Webhooks", DECISIONS.md "Webhooks"). The secret is shown once at creation and kept
 * sealed (secretbox) because every delivery must sign with it again.
 */
import { Clock, Context, Effect, Layer, Result } from "effect"
import { AppConfig } from "../config.ts"
import { owned, ownedAddress as ownedAddressOf } from "../shared/ownership.ts"
import { Forbidden, InternalError, NotFound, ValidationError } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { randomHex } from "../shared/crypto.ts"
import { seal } from "../shared/secretbox.ts"
import { SECRET_CONTEXT, WEBHOOK_TEST, WebhookDeliveries, describeOutcome, isDelivered, testDeliveryId } from "./delivery.ts"
import {
  type CreateWebhookBody,
  toWebhook,
  toWebhookDelivery,
  type UpdateWebhookBody,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryRow,
  type WebhookRow,
  type WebhookTestResult,
} from "./schema.ts"
import { checkWebhookUrl } from "./url.ts"
import { newestFirst } from "../shared/pages.ts"

export interface WebhooksShape {
  /** Creates an active webhook on an owned address; the answer carries the secret, once. */
  readonly create: (userId: number, body: CreateWebhookBody) => Effect.Effect<Webhook, ValidationError | Forbidden | NotFound | DbError>
  readonly list: (userId: number, addressId: number) => Effect.Effect<ReadonlyArray<Webhook>, Forbidden | NotFound | DbError>
  /** Changes `is_active` and/or `url`. */
  readonly update: (userId: number, id: number, body: UpdateWebhookBody) => Effect.Effect<Webhook, ValidationError | Forbidden | NotFound | DbError>
  readonly remove: (userId: number, id: number) => Effect.Effect<void, Forbidden | NotFound | DbError>
  /** Deliveries of one webhook, newest first. */
  readonly deliveries: (
    userId: number,
    id: number,
    page: { readonly limit: number; readonly offset: number },
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<WebhookDelivery>; readonly total: number }, Forbidden | NotFound | DbError>
  /** Sends a `webhook.test` event now and reports what the receiver answered. */
  readonly test: (userId: number, id: number) => Effect.Effect<WebhookTestResult, Forbidden | NotFound | InternalError | DbError>
  /** Re-emits `inbound.message_received` for a stored message to every active webhook of its address. */
  readonly trigger: (userId: number, messageId: number) => Effect.Effect<ReadonlyArray<WebhookDelivery>, Forbidden | NotFound | DbError>
}

export class Webhooks extends Context.Service<Webhooks, WebhooksShape>()("app/Webhooks") {
  static readonly layer = Layer.effect(
    Webhooks,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const deliveries = yield* WebhookDeliveries

      const ownedAddress = (userId: number, addressId: number) => ownedAddressOf(db, userId, addressId)

      const ownedWebhook = (userId: number, id: number) =>
        Effect.flatMap(db.query<WebhookRow>("SELECT * FROM webhooks WHERE id = $1", [id]), (rows) => owned("webhook", rows, userId))

      const validUrl = (url: string) =>
        Result.match(checkWebhookUrl(url, config.webhookAllowPrivate), {
          onSuccess: Effect.succeed,
          onFailure: (reason) => Effect.fail(ValidationError.field("url", reason)),
        })

      const create = Effect.fn("Webhooks.create")(function*(userId: number, body: CreateWebhookBody) {
        const url = yield* validUrl(body.url)
        yield* ownedAddress(userId, body.address_id)
        const secret = body.secret ?? `whsec_${yield* randomHex(16)}`
        const sealed = yield* seal(config.secretsKey, secret, SECRET_CONTEXT)
        const at = new Date(Number(yield* Clock.currentTimeMillis))
        const [row] = yield* db.query<WebhookRow>(
          `INSERT INTO webhooks (user_id, address_id, url, secret_sealed, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $5) RETURNING *`,
          [userId, body.address_id, url, sealed, at],
        )
        return toWebhook(row!, secret)
      })

      const list = Effect.fn("Webhooks.list")(function*(userId: number, addressId: number) {
        yield* ownedAddress(userId, addressId)
        const rows = yield* db.query<WebhookRow>("SELECT * FROM webhooks WHERE address_id = $1 ORDER BY id", [addressId])
        return rows.map((r) => toWebhook(r))
      })

      const update = Effect.fn("Webhooks.update")(function*(userId: number, id: number, body: UpdateWebhookBody) {
        const url = body.url === undefined ? undefined : yield* validUrl(body.url)
        const current = yield* ownedWebhook(userId, id)
        if (url === undefined && body.is_active === undefined) return toWebhook(current)
        const at = new Date(Number(yield* Clock.currentTimeMillis))
        const [row] = yield* db.query<WebhookRow>(
          `UPDATE webhooks SET url = COALESCE($2, url), is_active = COALESCE($3, is_active), updated_at = $4
            WHERE id = $1 RETURNING *`,
          [id, url ?? null, body.is_active ?? null, at],
        )
        if (!row) return yield* new NotFound({ message: "webhook not found" })
        return toWebhook(row)
      })

      const remove = Effect.fn("Webhooks.remove")(function*(userId: number, id: number) {
        yield* ownedWebhook(userId, id)
        yield* db.query("DELETE FROM webhooks WHERE id = $1", [id])
      })

      const deliveryPage = newestFirst<WebhookDeliveryRow>(db, "webhook_deliveries", "webhook_id")
      const listDeliveries = Effect.fn("Webhooks.deliveries")(function*(userId: number, id: number, page: { limit: number; offset: number }) {
        yield* ownedWebhook(userId, id)
        const { rows, total } = yield* deliveryPage(id, page)
        return { rows: rows.map(toWebhookDelivery), total }
      })

      const test = Effect.fn("Webhooks.test")(function*(userId: number, id: number) {
        const webhook = yield* ownedWebhook(userId, id)
        const started = Number(yield* Clock.currentTimeMillis)
        const body = JSON.stringify({
          event: WEBHOOK_TEST,
          webhook_id: webhook.id,
          address_id: webhook.address_id,
          message: "This is a test event. Your endpoint received and can verify it.",
          timestamp: new Date(started).toISOString(),
        })
        const outcome = yield* deliveries.send(webhook, yield* testDeliveryId, body).pipe(
          Effect.mapError((e) => new InternalError({ message: "internal error", detail: e.message })),
        )
        return {
          webhook_id: webhook.id,
          event: WEBHOOK_TEST,
          delivered: isDelivered(outcome),
          status_code: outcome._tag === "Answered" ? outcome.status : null,
          error: describeOutcome(outcome),
          duration_ms: Number(yield* Clock.currentTimeMillis) - started,
        }
      })

      const trigger = Effect.fn("Webhooks.trigger")(function*(userId: number, messageId: number) {
        const message = yield* Effect.flatMap(
          db.query<{ user_id: number; address_id: number }>("SELECT user_id, address_id FROM inbound_messages WHERE id = $1", [messageId]),
          (rows) => owned("message", rows, userId),
        )
        const rows = yield* deliveries.enqueue({ id: messageId, addressId: message.address_id })
        if (rows.length > 0) yield* deliveries.wake
        return rows.map(toWebhookDelivery)
      })

      return Webhooks.of({ create, list, update, remove, deliveries: listDeliveries, test, trigger })
    }),
  )
}
