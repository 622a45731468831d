/**
 * A PGlite thread (src/db/pglite-worker.ts) that dies, as a thread can (out of memory, a native
 * crash), when it is asked `SELECT 'die' AS x`: the thread adapter's tests use it to show that
 * statements waiting for a dead thread fail instead of hanging, and so do later ones.
 */
import { parentPort } from "node:worker_threads"

parentPort!.on("message", (m: { op?: string; text?: string }) => {
  if (m.op === "query" && m.text === "SELECT 'die' AS x") process.exit(3)
})
await import("../../src/db/pglite-worker.ts")
