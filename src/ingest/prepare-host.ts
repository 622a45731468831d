/**
 * A thread this process runs anyway that can also prepare received mail: PGlite's
 * (src/db/pglite-thread.ts). The prepare pool (./prepare-pool.ts) takes it as its first thread
 * instead of starting one of its own.
 *
 * Why: on two cores, a thread of its own for preparing cost more than the work it took off the
 * event loop once the database already had a thread: its isolate, its collector and a wake-up
 * per job. With PGlite's thread preparing, one message per connection to 20 accounts went
 * 869 → 912 msgs/s (6 interleaved pairs, 5 faster), 2 KiB over 20 reused sessions 1,245 → 1,278,
 * at ~25 MiB less peak RSS (bench/REPORT.md, MX ingest, thirty-fourth session). Under Deno the
 * same change was 15–20 % slower, so there PGlite's thread offers no host (src/db/layer.ts).
 *
 * The price: code that throws outside every promise there would end the database's thread too,
 * where it used to end only a prepare thread. Preparing never throws that way for the mail's
 * content (effects/ingest/mime.ts keeps what it cannot parse); the MIME corpus and the SMTP fuzz
 * suites run on this thread in `npm test`.
 */
import { Context } from "effect"
import type { MessagePort } from "node:worker_threads"

export interface PrepareHostShape {
  /** A new port whose jobs that thread serves (./prepare-serve.ts); undefined: there is none (or it is gone). */
  readonly openPort: () => MessagePort | undefined
}

export const PrepareHost = Context.Reference<PrepareHostShape>("app/PrepareHost", { defaultValue: () => ({ openPort: () => undefined }) })
