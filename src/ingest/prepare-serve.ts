/**
 * The prepare side of a port from the prepare pool (./prepare-pool.ts): runs `prepareMessage` for
 * the jobs posted on it and posts back each result. It runs on a prepare thread of the pool's own
 * (./prepare-worker.ts) or on a thread that also does other work (PGlite's, ./prepare-host.ts). It
 * needs no database and no Effect runtime; its DNS questions go to the main thread, whose Dns port
 * keeps the TTL cache of the process, and the answers are kept here for as long as that cache said
 * they may be; so are the verdicts of unsigned mail that rest on them (effects/ingest/verdicts.ts).
 *
 * Served with a `key` (on PGlite's thread), each prepared message's row and bytes stay on this
 * thread for the statement that stores it (./kept-messages.ts), and only its summary goes back.
 *
 * Messages on the port: in  {t: "jobs", jobs: [{id, job}]} | {t: "dns", q, ok, records | code, message}
 *                           | {t: "forget", ids}   (kept messages no statement will name again)
 *                       out {t: "done", id, ok, value | message} | {t: "dns", q, name, rrtype}
 *                       (a dns answer also carries keepMs; a kept message's value is its
 *                       summary and `byteLength`)
 */
import type { DNSResolver } from "mailauth"
import type { MessagePort } from "node:worker_threads"
import type { Authenticated } from "../../effects/ingest/authenticate.ts"
import { type PrepareJob, prepareMessage } from "../../effects/ingest/prepare.ts"
import { freeBytes } from "../../effects/shared/free-bytes.ts"
import { type KeptResolver, makeVerdictMemo } from "../../effects/ingest/verdicts.ts"
import { jobQueue } from "./job-queue.ts"
import { forget, forgetPort, keptFor } from "./kept-messages.ts"

/** A resolver failure as mailauth reads it (`code`), built without a stack: negative answers are common. */
const dnsFailure = (code: string, message: string): Error => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  const e = Object.assign(new Error(message), { code })
  Error.stackTraceLimit = limit
  return e
}

type Answer =
  | { readonly ok: true; readonly records: Array<Array<string>> }
  | { readonly ok: false; readonly code: string; readonly message: string }

type Incoming =
  | { readonly t: "jobs"; readonly jobs: ReadonlyArray<{ readonly id: number; readonly job: PrepareJob }> }
  | { readonly t: "forget"; readonly ids: ReadonlyArray<number> }
  | ({ readonly t: "dns"; readonly q: number; readonly keepMs: number } & Answer)

const MAX_KEPT = 10_000

const settle = (answer: Answer, resolve: (records: Array<Array<string>>) => void, reject: (e: Error) => void) =>
  answer.ok ? resolve(answer.records) : reject(dnsFailure(answer.code, answer.message))

const keyOf = (name: string, rrtype: string) => `${rrtype} ${name.toLowerCase()}`

/**
 * Jobs run at most this many at a time, in arrival order (./job-queue.ts). Measured with the
 * writer committing what is ready (2 KiB over 20 reused sessions, three 12,000-message runs):
 * PostgreSQL 548–618 msgs/s with every job started at once, 636–826 with two at a time (one at
 * a time, in shorter runs: 614–665, no better).
 */
const RUNNING_MAX = 2

/** Serves the prepare jobs posted on `port` until it closes; with `key`, keeps what it prepared here (./kept-messages.ts). */
export const servePrepare = (port: MessagePort, key?: number): void => {
  const keptHere = key === undefined ? undefined : keptFor(key)
  if (key !== undefined) port.on("close", () => forgetPort(key))
  /** Answers the main thread gave, each kept only as long as its cache keeps it (`keepMs`). */
  const kept = new Map<string, { readonly until: number; readonly answer: Answer }>()

  let nextQuestion = 0
  const questions = new Map<
    number,
    { key: string; resolve: (records: Array<Array<string>>) => void; reject: (e: Error) => void; unpark: () => void }
  >()
  const ask: DNSResolver = (name, rrtype) =>
    new Promise((resolve, reject) => {
      const key = keyOf(name, rrtype)
      const hit = kept.get(key)
      if (hit && hit.until > performance.now()) return settle(hit.answer, resolve as (records: Array<Array<string>>) => void, reject)
      const q = nextQuestion++
      questions.set(q, { key, resolve: resolve as (records: Array<Array<string>>) => void, reject, unpark: jobs.park() })
      port.postMessage({ t: "dns", q, name, rrtype })
    })
  /** Until when an answer may be kept: as long as this side keeps it (0: not at all). */
  const resolver: KeptResolver = Object.assign(ask, { keptUntil: (name: string, rrtype: string) => kept.get(keyOf(name, rrtype))?.until ?? 0 })

  /** Verdicts of unsigned mail this side already came to (effects/ingest/verdicts.ts). */
  const verdicts = makeVerdictMemo<Authenticated>()

  const jobs = jobQueue<{ readonly id: number; readonly job: PrepareJob }>(RUNNING_MAX, ({ id, job }) =>
    // The job's bytes were moved here and are read by nobody once it is prepared.
    prepareMessage(job, resolver, verdicts).finally(() => freeBytes(job.source._tag === "Memory" ? job.source.bytes : undefined)).then(
      (value) => {
        if (!keptHere) {
          // The row and the message's bytes are handed over, not copied (the bytes are most of a large message).
          return port.postMessage({ t: "done", id, ok: true, value }, [value.row.buffer as ArrayBuffer, value.bytes.buffer as ArrayBuffer])
        }
        const { row, bytes, ...summary } = value
        keptHere.set(id, { row, bytes })
        port.postMessage({ t: "done", id, ok: true, value: { ...summary, byteLength: bytes.byteLength } })
      },
      (e: unknown) => port.postMessage({ t: "done", id, ok: false, message: e instanceof Error ? e.message : String(e) }),
    )
  )

  port.on("message", (m: Incoming) => {
    if (m.t === "dns") {
      const waiting = questions.get(m.q)
      questions.delete(m.q)
      if (!waiting) return
      waiting.unpark()
      if (m.keepMs > 0) {
        kept.delete(waiting.key)
        kept.set(waiting.key, { until: performance.now() + m.keepMs, answer: m })
        if (kept.size > MAX_KEPT) kept.delete(kept.keys().next().value!)
      }
      return settle(m, waiting.resolve, waiting.reject)
    }
    if (m.t === "forget") return forget(key!, m.ids)
    for (const job of m.jobs) jobs.add(job)
  })
}
