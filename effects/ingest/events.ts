/**
 * What happens after messages are stored. Ingest commits many messages in one transaction and
 * calls every subscriber's `stored` once per commit, inside it, so the follow-up work (webhook
 * deliveries, SMS, agent replies) is queued atomically with the messages (outbox): either the
 * messages and all their follow-up rows exist, or none. A subscriber writes rows only for the
 * subscriptions that exist (one INSERT … SELECT … JOIN per commit, however many messages), and
 * answers what to do once the transaction committed: wake its worker when it queued something,
 * nothing otherwise (a worker woken for nothing still costs a claim query per commit).
 *
 * Subscribers (webhooks, SMS, agent, and whatever comes next) are listed in src/layers.ts.
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
  readonly receivedAt: Date
}

export interface MessageSubscriber {
  /**
   * Queues follow-up work for the messages of one commit; runs inside the storing transaction.
   * Succeeds with the effect to run after the commit (wake a worker, or `Effect.void`).
   */
  readonly stored: (messages: ReadonlyArray<StoredMessage>) => Effect.Effect<Effect.Effect<void>, DbError>
}

export type MessageEventsShape = MessageSubscriber

/** The after-commit effect of a subscriber that queued `n` rows. */
export const wakeIf = (n: number, wake: Effect.Effect<void>): Effect.Effect<void> => (n > 0 ? wake : Effect.void)

export class MessageEvents extends Context.Service<MessageEvents, MessageEventsShape>()("app/MessageEvents") {
  /** No subscribers (a capability that is not wired yet, or tests of ingest alone). */
  static readonly none = Layer.succeed(MessageEvents, MessageEvents.of({ stored: () => Effect.succeed(Effect.void) }))

  /**
   * Runs several subscribers; an empty commit calls none of them. Their statements go out
   * together (PostgreSQL pipelines them on the transaction's connection: one round trip, not one
   * per subscriber); they touch different tables, so their order does not matter.
   */
  static readonly combine = (subscribers: ReadonlyArray<MessageSubscriber>): MessageEventsShape => ({
    stored: (ms) =>
      ms.length === 0
        ? Effect.succeed(Effect.void)
        : Effect.map(
          Effect.forEach(subscribers, (s) => s.stored(ms), { concurrency: "unbounded" }),
          (after) => Effect.forEach(after, (a) => a, { discard: true }),
        ),
  })
}
