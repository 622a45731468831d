/**
 * Account event endpoints (DECISIONS.md "Bounces, complaints and outbound events"): HTTP
 * endpoints of the whole account that receive signed events about its outbound mail and its
 * inbound messages. Like inbox webhooks, the secret is shown once and kept sealed, URLs follow
 * the same rules, and deliveries share the webhook machinery (event-deliveries.ts).
 */
import { Clock, Context, Effect, Layer, Result } from "effect"
import { AppConfig } from "../config.ts"
import { type Forbidden, LimitReached, NotFound, ValidationError } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { randomHex } from "../shared/crypto.ts"
import { owned } from "../shared/ownership.ts"
import { seal } from "../shared/secretbox.ts"
import {
  type CreateEventEndpointBody,
  type EventDelivery,
  type EventDeliveryRow,
  type EventEndpoint,
  type EventEndpointRow,
  toEventDelivery,
  toEventEndpoint,
  type UpdateEventEndpointBody,
} from "./endpoint-schema.ts"
import { ENDPOINT_SECRET_CONTEXT } from "./event-deliveries.ts"
import { checkWebhookUrl } from "./url.ts"
import { newestFirst } from "../shared/pages.ts"

/** Endpoints per account: every event is written once per subscribed endpoint. */
export const MAX_EVENT_ENDPOINTS = 20

export interface EventEndpointsShape {
  /** Creates an active endpoint; the answer carries the secret, once. */
  readonly create: (userId: number, body: CreateEventEndpointBody) => Effect.Effect<EventEndpoint, ValidationError | LimitReached | DbError>
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<EventEndpoint>, DbError>
  /** Changes `url`, `events` and/or `is_active`. */
  readonly update: (userId: number, id: number, body: UpdateEventEndpointBody) => Effect.Effect<EventEndpoint, ValidationError | Forbidden | NotFound | DbError>
  /** Deletes the endpoint and its delivery history. */
  readonly remove: (userId: number, id: number) => Effect.Effect<void, Forbidden | NotFound | DbError>
  /** Deliveries of one endpoint, newest first. */
  readonly deliveries: (
    userId: number,
    id: number,
    page: { readonly limit: number; readonly offset: number },
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<EventDelivery>; readonly total: number }, Forbidden | NotFound | DbError>
}

export class EventEndpoints extends Context.Service<EventEndpoints, EventEndpointsShape>()("app/EventEndpoints") {
  static readonly layer = Layer.effect(
    EventEndpoints,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const ownedEndpoint = (userId: number, id: number) =>
        Effect.flatMap(db.query<EventEndpointRow>("SELECT * FROM event_endpoints WHERE id = $1", [id]), (rows) => owned("endpoint", rows, userId))

      const validUrl = (url: string) =>
        Result.match(checkWebhookUrl(url, config.webhookAllowPrivate), {
          onSuccess: Effect.succeed,
          onFailure: (reason) => Effect.fail(ValidationError.field("url", reason)),
        })

      const create = Effect.fn("EventEndpoints.create")(function*(userId: number, body: CreateEventEndpointBody) {
        const url = yield* validUrl(body.url)
        const [count] = yield* db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM event_endpoints WHERE user_id = $1", [userId])
        if ((count?.n ?? 0) >= MAX_EVENT_ENDPOINTS) {
          return yield* new LimitReached({ message: `at most ${MAX_EVENT_ENDPOINTS} event endpoints per account` })
        }
        const secret = body.secret ?? `whsec_${yield* randomHex(16)}`
        const sealed = yield* seal(config.secretsKey, secret, ENDPOINT_SECRET_CONTEXT)
        const at = yield* now
        const [row] = yield* db.query<EventEndpointRow>(
          `INSERT INTO event_endpoints (user_id, url, secret_sealed, events, created_at, updated_at)
           VALUES ($1, $2, $3, $4::jsonb, $5, $5) RETURNING *`,
          [userId, url, sealed, JSON.stringify(body.events), at],
        )
        return toEventEndpoint(row!, secret)
      })

      const list = Effect.fn("EventEndpoints.list")(function*(userId: number) {
        const rows = yield* db.query<EventEndpointRow>("SELECT * FROM event_endpoints WHERE user_id = $1 ORDER BY id", [userId])
        return rows.map((r) => toEventEndpoint(r))
      })

      const update = Effect.fn("EventEndpoints.update")(function*(userId: number, id: number, body: UpdateEventEndpointBody) {
        const url = body.url === undefined ? undefined : yield* validUrl(body.url)
        const current = yield* ownedEndpoint(userId, id)
        if (url === undefined && body.events === undefined && body.is_active === undefined) return toEventEndpoint(current)
        const [row] = yield* db.query<EventEndpointRow>(
          `UPDATE event_endpoints
              SET url = COALESCE($2, url), events = COALESCE($3::jsonb, events), is_active = COALESCE($4, is_active), updated_at = $5
            WHERE id = $1 RETURNING *`,
          [id, url ?? null, body.events === undefined ? null : JSON.stringify(body.events), body.is_active ?? null, yield* now],
        )
        if (!row) return yield* new NotFound({ message: "endpoint not found" })
        return toEventEndpoint(row)
      })

      const remove = Effect.fn("EventEndpoints.remove")(function*(userId: number, id: number) {
        yield* ownedEndpoint(userId, id)
        yield* db.query("DELETE FROM event_endpoints WHERE id = $1", [id])
      })

      const deliveryPage = newestFirst<EventDeliveryRow>(db, "event_deliveries", "endpoint_id")
      const deliveries = Effect.fn("EventEndpoints.deliveries")(function*(userId: number, id: number, page: { limit: number; offset: number }) {
        yield* ownedEndpoint(userId, id)
        const { rows, total } = yield* deliveryPage(id, page)
        return { rows: rows.map(toEventDelivery), total }
      })

      return EventEndpoints.of({ create, list, update, remove, deliveries })
    }),
  )
}
