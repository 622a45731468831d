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
import { Layer } from "effect"
import { AGENT_QUEUE } from "../../effects/agent/jobs.ts"
import { AGENT_LEASE, AgentReplier } from "../../effects/agent/replier.ts"
import type { AgentJobRow } from "../../effects/agent/schema.ts"
import { type DeliveryQueue, deliveryWorker } from "./deliveries.ts"

const agentQueue = AgentReplier.useSync((replier): DeliveryQueue<AgentJobRow> => ({
  name: AGENT_QUEUE,
  table: "agent_jobs",
  statuses: ["pending"],
  lease: AGENT_LEASE,
  concurrency: 2,
  pollInterval: "5 seconds",
  attempt: replier.attempt,
}))

const agent = deliveryWorker(agentQueue)

/** The worker's spec; tests drive it with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const agentWorkerSpec = agent.spec

export const agentWorkerLayer = agent.layer.pipe(Layer.provide(AgentReplier.layer))
