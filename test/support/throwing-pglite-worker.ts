/**
 * A PGlite thread (src/db/pglite-worker.ts) whose preparing throws outside every promise, as
 * code on mail crafted to break it might, when it is handed a message from
 * `throw@sender.example`: the prepare pool's tests use it to show that such an exception fails
 * the jobs there and ends the thread's preparing, not its database.
 */
import { type MessagePort, parentPort } from "node:worker_threads"

parentPort!.on("message", (m: { op?: string; port?: MessagePort }) => {
  if (m.op !== "serve-prepare") return
  m.port!.on("message", (p: { t: string; jobs?: ReadonlyArray<{ job: { mailFrom: string } }> }) => {
    if (p.t === "jobs" && p.jobs?.some((j) => j.job.mailFrom === "throw@sender.example")) {
      setImmediate(() => {
        throw new Error("thrown while preparing")
      })
    }
  })
})
await import("../../src/db/pglite-worker.ts")
