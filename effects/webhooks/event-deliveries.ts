/**
 * Deliveries to account event endpoints: one row per (event, subscribed endpoint), written in
 * the transaction of the fact (an outbound outcome recorded, a bounce or complaint processed, an
 * inbound message stored), then attempted by the event worker on the shared delivery machine
 * (deliveries/outbox.ts), signed and SSRF-guarded exactly like inbox webhooks. The body is fixed
 * when the event happens, so every retry sends the same bytes.
 */
import { Clock, Context, Effect, Layer, type Option } from "effect"
import { type Handed, leaseFor, makeHandoff, queueHanded } from "../deliveries/handoff.ts"
import { type Channel, makeAttempts } from "../deliveries/outbox.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { WorkSignals } from "../ports/WorkSignals.ts"
import type { EventDeliveryRow, EventEndpointRow, OutboundEvent } from "./endpoint-schema.ts"
import { makeSignedPost } from "./post.ts"
import { WebhookDeliveryOptions } from "./transport.ts"

/** WorkSignals queue (and worker) name. */
export const EVENT_QUEUE = "event-endpoints"
/** Secretbox context of `event_endpoints.secret_sealed`. */
export const ENDPOINT_SECRET_CONTEXT = "event_endpoint.secret"
export const INBOUND_EVENT = "inbound.message_received"

/** `webhook-id` of an event delivery; prefixed so it never equals an inbox delivery's id. */
export const eventDeliveryId = (id: number): string => `evt_${id}`

export interface EventDeliveriesShape {
  /**
   * Queues each event for every active endpoint of the account subscribed to it; joins the
   * caller's transaction. Writes nothing when no endpoint subscribes.
   */
  readonly emit: (userId: number, events: ReadonlyArray<OutboundEvent>) => Effect.Effect<number, DbError>
  /**
   * Queues `inbound.message_received` (the inbox webhook's payload) for the subscribed endpoints of
   * each message's account: one statement for a whole ingest commit, rows only where endpoints exist.
   */
  readonly emitInbound: (
    messages: ReadonlyArray<{ readonly id: number; readonly userId: number; readonly addressId: number }>,
  ) => Effect.Effect<number, DbError>
  /** Makes the next attempt of a claimed delivery; returns when the following one is due, if any. */
  readonly attempt: (job: EventDeliveryRow) => Effect.Effect<Option.Option<Date>, DbError>
  /** Wakes the worker (after the queuing transaction committed). */
  readonly wake: Effect.Effect<void>
  /**
   * `emitInbound` as an ingest commit's subscriber wants it: the deliveries taken for this
   * instance's worker when it runs (../deliveries/handoff.ts), else for claiming. Succeeds with
   * what to do once the transaction committed (hand them over, wake the worker, or nothing).
   */
  readonly queueInbound: (
    messages: ReadonlyArray<{ readonly id: number; readonly userId: number; readonly addressId: number }>,
  ) => Effect.Effect<Effect.Effect<void>, DbError>
  /** The deliveries handed over by commits, each as its attempt (the event worker runs them). */
  readonly handed: Handed
}

/** A delivery queued taken (migration 037), with the endpoint's columns as they were when queued. */
interface TakenEventDelivery extends EventDeliveryRow {
  readonly url: string
  readonly secret_sealed: string
  readonly is_active: boolean
}

const endpointOf = (row: TakenEventDelivery): EventEndpointRow =>
  ({ id: row.endpoint_id, url: row.url, secret_sealed: row.secret_sealed, is_active: row.is_active }) as EventEndpointRow

interface NewDelivery {
  readonly endpoint_id: number
  readonly event: string
  readonly body: string
  readonly email_id: number | null
  readonly message_id: number | null
}

export class EventDeliveries extends Context.Service<EventDeliveries, EventDeliveriesShape>()("app/EventDeliveries") {
  static readonly layer = Layer.effect(
    EventDeliveries,
    Effect.gen(function*() {
      const db = yield* Database
      const signals = yield* WorkSignals
      const signed = yield* makeSignedPost
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      /** The account's active endpoints subscribed to any of `events`. */
      const subscribers = (userId: number, events: ReadonlyArray<string>) =>
        db.query<Pick<EventEndpointRow, "id" | "events">>(
          `SELECT id, events FROM event_endpoints
            WHERE user_id = $1 AND is_active AND events ?| (SELECT array_agg(x) FROM jsonb_array_elements_text($2::jsonb) AS x)
            ORDER BY id`,
          [userId, JSON.stringify([...new Set(events)])],
        )

      const insert = (rows: ReadonlyArray<NewDelivery>, at: Date) =>
        rows.length === 0 ? Effect.succeed(0) : Effect.map(
          db.query(
            `INSERT INTO event_deliveries (endpoint_id, event, body, email_id, message_id, status, attempt, next_attempt_at, created_at)
             SELECT v.endpoint_id, v.event, v.body, v.email_id, v.message_id, 'pending', 0, $2, $2
               FROM jsonb_to_recordset($1::jsonb) AS v(pos int, endpoint_id bigint, event text, body text, email_id bigint, message_id bigint)
              ORDER BY v.pos
             RETURNING id`,
            [JSON.stringify(rows.map((r, pos) => ({ ...r, pos }))), at],
          ),
          (inserted) => inserted.length,
        )

      const emit = Effect.fn("EventDeliveries.emit")(function*(userId: number, events: ReadonlyArray<OutboundEvent>) {
        if (events.length === 0) return 0
        const endpoints = yield* subscribers(userId, events.map((e) => e.event))
        if (endpoints.length === 0) return 0
        const at = yield* now
        const rows = events.flatMap((e) => {
          const body = JSON.stringify({
            event: e.event,
            email_id: e.email_id,
            recipient: e.recipient,
            status: e.status,
            smtp_code: e.smtp_code,
            diagnostic: e.diagnostic,
            timestamp: at.toISOString(),
          })
          return endpoints.filter((ep) => ep.events.includes(e.event)).map((ep): NewDelivery => ({
            endpoint_id: ep.id,
            event: e.event,
            body,
            email_id: e.email_id,
            message_id: null,
          }))
        })
        return yield* insert(rows, at)
      })

      const emitInbound = Effect.fn("EventDeliveries.emitInbound")(function*(
        messages: ReadonlyArray<{ id: number; userId: number; addressId: number }>,
      ) {
        if (messages.length === 0) return 0
        const at = yield* now
        // The body is built in SQL because it names the endpoint (`webhook_id`), known only in the
        // join; a function (migration 028) so PGlite keeps its plan: it runs in every ingest commit.
        const [row] = yield* db.query<{ n: number }>(
          "SELECT queue_event_deliveries($1, $2, $3, $4::json) AS n",
          [INBOUND_EVENT, at.toISOString(), at, JSON.stringify(messages.map((m) => ({ id: m.id, user_id: m.userId, address_id: m.addressId })))],
        )
        return Number(row!.n)
      })

      const channel: Channel<EventDeliveryRow, EventEndpointRow> = {
        name: "EventDeliveries",
        table: "event_deliveries",
        targetKey: "endpoint_id",
        targetTable: "event_endpoints",
        statuses: { open: ["pending", "retrying"], retrying: "retrying", delivered: "delivered" },
        inactive: "endpoint is inactive",
        noAnswer: { status_code: null },
        perform: (job, endpoint) => signed.attempt(endpoint, ENDPOINT_SECRET_CONTEXT, eventDeliveryId(job.id), job.body),
        deactivate: (endpoint, at) =>
          Effect.asVoid(db.query("UPDATE event_endpoints SET is_active = false, updated_at = $2 WHERE id = $1", [endpoint.id, at])),
      }

      const attempts = yield* makeAttempts(channel)
      const lease = leaseFor((yield* WebhookDeliveryOptions).timeout)
      const handoff = yield* makeHandoff<TakenEventDelivery>({
        name: EVENT_QUEUE,
        attempt: (row) => attempts.attemptTaken(row, endpointOf(row)),
        untake: attempts.untake,
      })
      const wake = signals.notify(EVENT_QUEUE)

      const queueInbound = (messages: ReadonlyArray<{ id: number; userId: number; addressId: number }>) =>
        messages.length === 0 ? Effect.succeed(Effect.void) : queueHanded(handoff, lease, {
          taken: (at, leaseEnd) =>
            db.query<TakenEventDelivery>(
              "SELECT * FROM queue_event_deliveries_taken($1, $2, $3, $4, $5::json)",
              [INBOUND_EVENT, at.toISOString(), at, leaseEnd, JSON.stringify(messages.map((m) => ({ id: m.id, user_id: m.userId, address_id: m.addressId })))],
            ),
          forClaim: emitInbound(messages),
          wake,
        })

      return EventDeliveries.of({ emit, emitInbound, queueInbound, handed: handoff.handed, attempt: attempts.attempt, wake })
    }),
  )
}
