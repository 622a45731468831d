/**
 * The agent's queue: one AgentJob per inbound message of an address whose agent is enabled and
 * not off, written in the transaction that stores the message (the unique message_id makes a
 * second queuing a no-op), then worked by the agent worker (src/workers/agent.ts, ./replier.ts).
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { StoredMessage } from "../ingest/events.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { WorkSignals } from "../ports/WorkSignals.ts"

/** WorkSignals queue (and worker) name. */
export const AGENT_QUEUE = "agent"

export interface AgentJobsShape {
  /** Queues the message when its address's agent is on; joins the storing transaction. Returns whether it queued. */
  readonly enqueue: (message: StoredMessage) => Effect.Effect<boolean, DbError>
  /** `enqueue` for the messages of one ingest commit; returns how many jobs it queued. */
  readonly enqueueMany: (messages: ReadonlyArray<StoredMessage>) => Effect.Effect<number, DbError>
  readonly wake: Effect.Effect<void>
}

export class AgentJobs extends Context.Service<AgentJobs, AgentJobsShape>()("app/AgentJobs") {
  static readonly layer = Layer.effect(
    AgentJobs,
    Effect.gen(function*() {
      const db = yield* Database
      const signals = yield* WorkSignals

      const enqueue = Effect.fn("AgentJobs.enqueue")(function*(message: StoredMessage) {
        const at = new Date(Number(yield* Clock.currentTimeMillis))
        const rows = yield* db.query(
          `INSERT INTO agent_jobs (user_id, address_id, message_id, status, attempt, next_attempt_at, created_at)
           SELECT user_id, address_id, $2, 'pending', 0, $3, $3
             FROM agent_configs WHERE address_id = $1 AND enabled AND mode <> 'off'
           ON CONFLICT (message_id) DO NOTHING
           RETURNING id`,
          [message.addressId, message.id, at],
        )
        return rows.length > 0
      })

      const enqueueMany = Effect.fn("AgentJobs.enqueueMany")(function*(messages: ReadonlyArray<StoredMessage>) {
        if (messages.length === 0) return 0
        const at = new Date(Number(yield* Clock.currentTimeMillis))
        // A function (migration 028) so PGlite keeps its plan: it runs in every ingest commit.
        const [row] = yield* db.query<{ n: number }>(
          "SELECT queue_agent_jobs($1, $2::json) AS n",
          [at, JSON.stringify(messages.map((m) => ({ id: m.id, address_id: m.addressId })))],
        )
        return Number(row!.n)
      })

      return AgentJobs.of({ enqueue, enqueueMany, wake: signals.notify(AGENT_QUEUE) })
    }),
  )
}
