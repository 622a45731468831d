/**
 * What happens after a message is stored. Ingest calls `stored` inside the transaction that
 * stores the message, so every follow-up (webhook deliveries, SMS, agent replies) is queued
 * atomically with it (outbox): either the message and all its follow-up rows exist, or none.
 * After the commit ingest calls `committed` so workers look at their queues at once.
 *
 * Subscribers (webhooks, SMS, agent) are combined into one live layer in src/layers.ts.
 */
import { Context, Effect, Layer } from "effect"
import type { DbError } from "../ports/Database.ts"

export interface StoredMessage {
  readonly id: number
  readonly userId: number
  readonly addressId: number
  readonly fromAddr: string
  readonly toAddr: string
  readonly subject: string
  readonly textBody: string
  readonly headers: Readonly<Record<string, unknown>>
  readonly receivedAt: Date
}

export interface MessageEventsShape {
  /** Queues follow-up work for a message; runs inside the storing transaction. */
  readonly stored: (message: StoredMessage) => Effect.Effect<void, DbError>
  /** Called after the storing transaction committed: wake the workers. */
  readonly committed: (message: StoredMessage) => Effect.Effect<void>
}

export class MessageEvents extends Context.Service<MessageEvents, MessageEventsShape>()("app/MessageEvents") {
  /** No subscribers (a capability that is not wired yet, or tests of ingest alone). */
  static readonly none = Layer.succeed(MessageEvents, MessageEvents.of({ stored: () => Effect.void, committed: () => Effect.void }))

  /** Runs several subscribers in order. */
  static readonly combine = (subscribers: ReadonlyArray<MessageEventsShape>): MessageEventsShape => ({
    stored: (m) => Effect.forEach(subscribers, (s) => s.stored(m), { discard: true }),
    committed: (m) => Effect.forEach(subscribers, (s) => s.committed(m), { discard: true }),
  })
}
