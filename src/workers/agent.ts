/**
 * The agent worker: an actor over `agent_jobs` on the foundation's worker pattern (durable rows
 * written with the inbound message, FOR UPDATE SKIP LOCKED claims, a lease, take-then-record
 * attempts, wake-ups at retry due times), because an auto reply owes what a webhook owes:
 * it survives restarts and is never made twice. Each claimed job is one AgentReplier attempt
 * (effects/agent/replier.ts): skip rules, AI call, then a stored draft or a send through
 * outbound. Concurrency is low on purpose: AI calls are slow and outbound is rate limited per
 * account (2/s), and replies are not urgent to the second.
 *
 * The replier is built here, after every service, so it sees OutboundSender wherever the
 * outbound capability is composed.
 */
import { Effect, Layer, Option } from "effect"
import { AGENT_QUEUE } from "../../effects/agent/jobs.ts"
import { AGENT_LEASE, AgentReplier } from "../../effects/agent/replier.ts"
import type { AgentJobRow } from "../../effects/agent/schema.ts"
import type { Database } from "../../effects/ports/Database.ts"
import { makeWakeups, wakeForEarliest } from "./webhooks.ts"
import { claimDue, runWorker, supervised, type WorkerSpec } from "./worker.ts"

/** The worker's spec; tests drive it with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const agentWorkerSpec = (onRetry: (at: Date) => Effect.Effect<void> = () => Effect.void) =>
  Effect.gen(function*() {
    const replier = yield* AgentReplier
    const spec: WorkerSpec<AgentJobRow, Database> = {
      name: AGENT_QUEUE,
      claim: claimDue<AgentJobRow>({ table: "agent_jobs", dueColumn: "next_attempt_at", statuses: ["pending"], lease: AGENT_LEASE }),
      handle: (job) => Effect.flatMap(replier.attempt(job), Option.match({ onNone: () => Effect.void, onSome: onRetry })),
      pollInterval: "5 seconds",
      concurrency: 2,
    }
    return spec
  })

export const agentWorkerLayer = Layer.effectDiscard(Effect.gen(function*() {
  const wakeAt = yield* makeWakeups(AGENT_QUEUE)
  const spec = yield* agentWorkerSpec(wakeAt)
  yield* wakeForEarliest(wakeAt, "agent_jobs", ["pending"])
  yield* Effect.forkScoped(supervised(spec.name, runWorker(spec)))
})).pipe(Layer.provide(AgentReplier.layer))
