/**
 * The agent's subscriber of stored inbound messages: queues one AgentJob inside the storing
 * transaction (when the address's agent is on), and wakes the worker once that committed.
 */
import { Effect } from "effect"
import type { MessageSubscriber } from "../ingest/events.ts"
import { AgentJobs } from "./jobs.ts"

export const agentSubscriber = Effect.gen(function*() {
  const jobs = yield* AgentJobs
  const subscriber: MessageSubscriber = {
    stored: (messages) => Effect.asVoid(jobs.enqueueMany(messages)),
    committed: () => jobs.wake,
  }
  return subscriber
})
