/**
 * The agent's subscriber of stored inbound messages: queues one AgentJob inside the storing
 * transaction (when the address's agent is on), and wakes the worker once that committed (only
 * when it queued one).
 */
import { Effect } from "effect"
import { type MessageSubscriber, wakeIf } from "../ingest/events.ts"
import { AgentJobs } from "./jobs.ts"

export const agentSubscriber = Effect.gen(function*() {
  const jobs = yield* AgentJobs
  const subscriber: MessageSubscriber = {
    subscriptions: "agent_configs",
    stored: (messages) => Effect.map(jobs.enqueueMany(messages), (n) => wakeIf(n, jobs.wake)),
  }
  return subscriber
})
