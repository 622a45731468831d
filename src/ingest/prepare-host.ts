/**
 * A thread this process runs anyway that can also prepare received mail: PGlite's
 * (src/db/pglite-thread.ts). The prepare pool (./prepare-pool.ts) sends it in-memory mail (up to
 * 1 MiB) instead of starting a thread of its own; spooled mail, whose preparing could hold the
 * database's thread for tens of milliseconds, still goes to a thread of the pool's own.
 *
 * Why: a thread of its own for preparing is one more isolate with its own collector, and a
 * wake-up per job; PGlite's thread is awake anyway. Measured on two cores (bench/REPORT.md, MX
 * ingest, thirty-fourth session, interleaved pairs against the code before): one message per
 * connection to 20 accounts +3 to +5 % (22 pairs, within the spread), 2 KiB over 20 reused
 * sessions −5 to +3 %, at 15–25 MiB less peak RSS in every run. Under Deno it was 15–20 % slower,
 * so there PGlite's thread offers no host (src/db/layer.ts).
 *
 * What PGlite's thread prepared stays there (./kept-messages.ts): the event loop gets the
 * message's summary (`KeptMessage`), the writer's batch names it, and the thread builds the batch
 * call's parameters from it (src/db/pglite-worker.ts). A small message's row and bytes used to
 * cross to the event loop and back inside the batch; measured against that (bench/REPORT.md, MX
 * ingest, thirty-fifth session, interleaved pairs): one message per connection to 20 accounts
 * +2.8 % msgs/s at 3.5 % less CPU a message (10 pairs, 7 faster), 2 KiB over 20 reused sessions
 * +1.2 % (6 pairs), both within the machine's spread.
 *
 * Code that throws outside every promise there would end the database's thread too, where it used
 * to end only a prepare thread. Preparing never throws that way for the mail's content
 * (effects/ingest/mime.ts keeps what it cannot parse; the MIME corpus and the SMTP fuzz suites run
 * on this thread in `npm test`), and should something still, PGlite's thread stops preparing
 * instead of dying (src/db/pglite-worker.ts): the jobs there fail, the pool goes on with threads of
 * its own, and the database is untouched.
 */
import { Context } from "effect"
import type { MessagePort } from "node:worker_threads"

/**
 * A port to the host: its jobs are served there (./prepare-serve.ts). With `key`, the host is the
 * database's own thread and keeps what it prepared for the statements that store it
 * (./kept-messages.ts): the pool then answers with `KeptMessage`s named by `key` and job id.
 */
export interface HostPort {
  readonly port: MessagePort
  readonly key?: number
}

export interface PrepareHostShape {
  /** A new port whose jobs that thread serves; undefined: there is none (or it is gone). */
  readonly openPort: () => HostPort | undefined
}

export const PrepareHost = Context.Reference<PrepareHostShape>("app/PrepareHost", { defaultValue: () => ({ openPort: () => undefined }) })
