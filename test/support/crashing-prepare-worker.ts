/**
 * A prepare worker (src/ingest/prepare-worker.ts) that dies, as a thread can (out of memory, a
 * native crash), when it is handed a message from `crash@sender.example`: the pool's tests use it
 * to show that a dead thread's jobs fail instead of hanging and that the next job gets a new one.
 */
import { parentPort } from "node:worker_threads"

parentPort!.on("message", (m: { t: string; jobs?: ReadonlyArray<{ job: { mailFrom: string } }> }) => {
  if (m.t === "jobs" && m.jobs?.some((j) => j.job.mailFrom === "crash@sender.example")) process.exit(3)
})
await import("../../src/ingest/prepare-worker.ts")
