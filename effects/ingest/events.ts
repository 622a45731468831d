/**
 * What happens after messages are stored. Ingest commits many messages in one transaction and
 * calls every subscriber's `stored` once per commit, inside it, so the follow-up work (webhook
 * deliveries, SMS, agent replies) is queued atomically with the messages (outbox): either the
 * messages and all their follow-up rows exist, or none. A subscriber writes rows only for the
 * subscriptions that exist (one INSERT … SELECT … JOIN per commit, however many messages), and
 * answers what to do once the transaction committed: wake its worker when it queued something,
 * nothing otherwise (a worker woken for nothing still costs a claim query per commit). A commit
 * first asks which subscription tables hold anything for its addresses and accounts (one call,
 * `followup_subscriptions`, migration 029) and calls only those subscribers: most mail goes to
 * addresses with none, and four statements finding nothing cost PGlite more than storing.
 *
 * Subscribers (webhooks, SMS, agent, and whatever comes next) are listed in src/layers.ts.
 */
import { Context, Effect, Layer } from "effect"
import type { DatabaseShape, DbError } from "../ports/Database.ts"

export interface StoredMessage {
  readonly id: number
  readonly userId: number
  readonly addressId: number
  readonly fromAddr: string
  readonly toAddr: string
  readonly subject: string
  /**
   * The text body as far as an SMS summary reads it (effects/sms/summary.ts `smsBodyOf`); the
   * stored row has all of it. Unset when the text was never made into a string on its way in (the
   * database made it from the raw MIME): the summary then reads the row's.
   */
  readonly smsBody?: string
  readonly receivedAt: Date
}

/** The tables subscriptions live in, as `followup_subscriptions` (migration 029) names them. */
export type SubscriptionTable = "webhooks" | "event_endpoints" | "sms_rules" | "agent_configs"

/** Follow-up work of one commit's stored copies. */
export interface FollowUps {
  /**
   * Queues follow-up work for the messages of one commit; runs inside the storing transaction.
   * Succeeds with the effect to run after the commit (wake a worker, or `Effect.void`).
   */
  readonly stored: (messages: ReadonlyArray<StoredMessage>) => Effect.Effect<Effect.Effect<void>, DbError>
}

/** What `plan` found: the follow-up work, and whether there is none (no subscriber applies). */
export interface Plan extends FollowUps {
  readonly quiet: boolean
}

/** Where a commit's copies go: the question `plan` asks is about these. */
export interface Copy {
  readonly addressId: number
  readonly userId: number
}

export interface MessageEventsShape extends FollowUps {
  /**
   * The subscribers a commit of `copies` needs (`followup_subscriptions`), asked inside the
   * storing transaction. Ingest asks alongside its storing statement: on PostgreSQL both go out
   * in one round trip. `stored` alone asks first, then queues.
   */
  readonly plan: (copies: ReadonlyArray<Copy>) => Effect.Effect<Plan, DbError>
}

export interface MessageSubscriber extends FollowUps {
  /** Where its subscriptions are: a commit whose addresses and accounts have none there skips it. */
  readonly subscriptions: SubscriptionTable
}

/** The after-commit effect of a subscriber that queued `n` rows. */
export const wakeIf = (n: number, wake: Effect.Effect<void>): Effect.Effect<void> => (n > 0 ? wake : Effect.void)

const nothing: Plan = { quiet: true, stored: () => Effect.succeed(Effect.void) }

/** `subscribers` run together: their statements go out at once (they touch different tables). */
const together = (subscribers: ReadonlyArray<FollowUps>): Plan =>
  subscribers.length === 0 ? nothing : {
    quiet: false,
    stored: (ms) =>
      ms.length === 0 ? Effect.succeed(Effect.void) : Effect.map(
        Effect.forEach(subscribers, (s) => s.stored(ms), { concurrency: "unbounded" }),
        (after) => Effect.forEach(after, (a) => a, { discard: true }),
      ),
  }

export class MessageEvents extends Context.Service<MessageEvents, MessageEventsShape>()("app/MessageEvents") {
  /** No subscribers (a capability that is not wired yet, or tests of ingest alone). */
  static readonly none = Layer.succeed(MessageEvents, MessageEvents.of({ ...nothing, plan: () => Effect.succeed(nothing) }))

  /**
   * Runs the subscribers whose tables hold something for the commit's copies; an empty commit
   * calls none of them. Their statements go out together (PostgreSQL pipelines them on the
   * transaction's connection: one round trip, not one per subscriber).
   */
  static readonly combine = (db: DatabaseShape, subscribers: ReadonlyArray<MessageSubscriber>): MessageEventsShape => {
    const plan = (copies: ReadonlyArray<Copy>) =>
      copies.length === 0 ? Effect.succeed(nothing) : Effect.map(
        db.query<{ t: string }>(
          "SELECT t FROM followup_subscriptions($1::int8[], $2::int8[]) AS t",
          [intArray(copies.map((c) => c.addressId)), intArray(copies.map((c) => c.userId))],
        ),
        (rows) => {
          const tables = new Set(rows.map((r) => r.t))
          return together(subscribers.filter((s) => tables.has(s.subscriptions)))
        },
      )
    return { plan, stored: (ms) => Effect.flatMap(plan(ms), (f) => f.stored(ms)) }
  }
}

/** Distinct ids as a PostgreSQL array literal (the same text on both drivers). */
const intArray = (ids: ReadonlyArray<number>): string => `{${[...new Set(ids)].join(",")}}`
