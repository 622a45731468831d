/**
 * A worker thread with a young generation of its own size. V8 reads `--max-semi-space-size` and
 * `--min-semi-space-size` when it creates an isolate, and they are process-wide: the process's
 * (src/process.ts `engineFlags`, 8 MB on PostgreSQL for the event loop's allocation rate) would
 * be every thread's too, and a flag set overrides a Worker's `resourceLimits`. So the flags are
 * set for the thread's isolate while it starts and put back once it runs (`online`), to what the
 * process was started with (absent: 0, V8's own choice).
 *
 * For a thread that allocates few objects but reads many bytes (the MX's protocol thread,
 * ./smtp/mx-threaded.ts): two 8 MB semi-spaces it never fills are resident memory for nothing.
 * Deno has no way to set V8 flags at run time: its threads start as they would.
 */
import * as v8 from "node:v8"
import type { Worker } from "node:worker_threads"
import { isDeno } from "./is-deno.ts"
import { flagName, givenFlags } from "./process.ts"

const SEMI_SPACE_FLAGS = ["max-semi-space-size", "min-semi-space-size"] as const

/** The value the process was started with for `--name=N` (the last one given wins), or "0". */
const givenValue = (name: string): string =>
  givenFlags().filter((f) => f.startsWith("--") && flagName(f) === name).at(-1)?.split("=")[1] ?? "0"

const setSemiSpaces = (values: Readonly<Record<(typeof SEMI_SPACE_FLAGS)[number], string>>) =>
  v8.setFlagsFromString(SEMI_SPACE_FLAGS.map((name) => `--${name}=${values[name]}`).join(" "))

/** `start()`'s worker, its isolate's semi-spaces `megabytes` MB each; the process's flags are as they were once it runs. */
export const withYoungGeneration = (megabytes: number, start: () => Worker): Worker => {
  if (isDeno) return start()
  const before = { "max-semi-space-size": givenValue("max-semi-space-size"), "min-semi-space-size": givenValue("min-semi-space-size") }
  setSemiSpaces({ "max-semi-space-size": String(megabytes), "min-semi-space-size": String(megabytes) })
  let worker: Worker
  try {
    worker = start()
  } catch (e) {
    setSemiSpaces(before)
    throw e
  }
  let restored = false
  const restore = () => {
    if (restored) return
    restored = true
    setSemiSpaces(before)
  }
  // A thread that fails before it runs still exits.
  worker.once("online", restore)
  worker.once("exit", restore)
  return worker
}
