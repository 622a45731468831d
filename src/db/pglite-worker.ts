/**
 * The PGlite thread (see ./pglite-thread.ts): opens the embedded database here, off the event
 * loop, and runs what the main thread asks of it, in the order asked. It is plain async code (no
 * Effect); the in-process adapter (./pglite.ts) does the opening, locking and serialising.
 *
 * Messages on the port:
 *   in  {id, op: "query", text, params | kept, tx?} | {id, op: "exec", script, tx?}
 *       (`kept`: an ingest batch naming messages kept here, effects/ingest/batch-parameters.ts)
 *       | {op: "reserve", tx} | {op: "release", tx}   (one-way: the main thread names `tx` itself)
 *       | {id, op: "listen" | "unlisten", channel} | {id, op: "close"}
 *       | {op: "serve-prepare", port, key}   (one-way: prepare jobs served on `port`, what they
 *         prepared kept here under `key`, src/ingest/prepare-host.ts)
 *   out {ready: true} | {ready: false, error} (once, after opening)
 *       {id, ok: true, value} | {id, ok: false, error: {message, code?, constraint?, …}}
 *       {notify: channel, payload} (posted before the answer of the statement that committed it)
 */
import { type MessagePort, parentPort, workerData } from "node:worker_threads"
import { openPglite, type PgliteOptions } from "./pglite.ts"
import type { Reserved } from "./connection.ts"
import { freeBytes } from "../../effects/shared/free-bytes.ts"
import type { KeptBatch } from "../../effects/ingest/batch-parameters.ts"
import { keptBatchParameters } from "../ingest/kept-messages.ts"

const port = parentPort!

type Request =
  | {
    readonly id: number
    readonly op: "query"
    readonly text: string
    readonly params?: ReadonlyArray<unknown>
    readonly kept?: KeptBatch
    readonly tx?: number
  }
  | { readonly id: number; readonly op: "exec"; readonly script: string; readonly tx?: number }
  | { readonly op: "reserve"; readonly tx: number }
  | { readonly op: "release"; readonly tx: number }
  | { readonly id: number; readonly op: "listen" | "unlisten"; readonly channel: string }
  | { readonly id: number; readonly op: "close" }
  | { readonly op: "serve-prepare"; readonly port: MessagePort; readonly key: number }

/** What a driver error carries that the Database port reads (SQLSTATE, constraint), cloneable. */
export const errorFields = (e: unknown): Record<string, unknown> => {
  if (typeof e !== "object" || e === null) return { message: String(e) }
  const out: Record<string, unknown> = { message: (e as { message?: unknown }).message ?? String(e) }
  for (const [k, v] of Object.entries(e)) if (typeof v === "string" || typeof v === "number") out[k] = v
  return out
}

const options = workerData as PgliteOptions
try {
  const { source, pg, close } = await openPglite(options)
  /**
   * Reservations by the main thread's transaction id, as promises: a transaction's statements
   * arrive right behind its "reserve" (nothing waits for an answer to it), and run once the
   * connection is theirs, in the order they came (promise callbacks run in the order registered).
   */
  const txs = new Map<number, Promise<Reserved>>()
  const unlisteners = new Map<string, () => Promise<void>>()
  const reserved = (tx: number) => txs.get(tx) ?? Promise.reject(new Error(`no transaction ${tx} on the embedded database`))

  const run = async (m: Exclude<Request, { readonly op: "reserve" | "release" | "serve-prepare" }>): Promise<unknown> => {
    switch (m.op) {
      case "query": {
        // Built here, when the statement is run: its rows and bytes are here already.
        const params = m.kept ? keptBatchParameters(m.kept) : m.params
        try {
          return await (m.tx === undefined ? source.query(m.text, params) : (await reserved(m.tx)).connection.query(m.text, params))
        } finally {
          if (m.kept) freeBytes(params![1] as Uint8Array)
        }
      }
      case "exec":
        return m.tx === undefined ? source.exec(m.script) : (await reserved(m.tx)).connection.exec(m.script)
      case "listen":
        if (!unlisteners.has(m.channel)) {
          unlisteners.set(m.channel, await pg.listen(m.channel, (payload) => port.postMessage({ notify: m.channel, payload })))
        }
        return undefined
      case "unlisten": {
        const unlisten = unlisteners.get(m.channel)
        unlisteners.delete(m.channel)
        return unlisten?.()
      }
      case "close":
        return close()
    }
  }

  /** The ports whose prepare jobs this thread serves (src/ingest/prepare-host.ts); undefined once it stopped. */
  let preparePorts: Set<MessagePort> | undefined = new Set()
  const servePrepareHere = (prepare: MessagePort, key: number) => {
    if (!preparePorts) return prepare.close()
    if (preparePorts.size === 0) process.on("uncaughtException", stopPreparing)
    preparePorts.add(prepare)
    // Loaded with the first message to prepare: a process that takes no mail never loads it. If it
    // cannot load, the port closes and the main thread fails the jobs it sent (src/ingest/prepare-pool.ts).
    import("../ingest/prepare-serve.ts").then(({ servePrepare }) => servePrepare(prepare, key), () => prepare.close())
  }
  /**
   * An exception nothing caught, once this thread prepares mail too: the likeliest thrower is that
   * code, on mail crafted to break it, and it must not take the database down with it (a prepare
   * thread of its own would just have died). Every prepare port is told and closed: the main
   * thread fails their jobs (the senders get 451 and retry) and prepares on threads of its own from
   * then on, and this thread goes on serving the database alone.
   */
  const stopPreparing = (e: unknown) => {
    const message = e instanceof Error ? e.message : String(e)
    for (const prepare of preparePorts ?? []) {
      prepare.postMessage({ t: "lost", message })
      prepare.close()
    }
    preparePorts = undefined
  }

  port.on("message", (m: Request) => {
    // A reservation takes the adapter's lock in arrival order, like every plain statement.
    if (m.op === "reserve") return void txs.set(m.tx, source.reserve())
    if (m.op === "serve-prepare") return servePrepareHere(m.port, m.key)
    if (m.op === "release") {
      const r = txs.get(m.tx)
      txs.delete(m.tx)
      return void r?.then((c) => c.release(), () => undefined)
    }
    // Every request starts as it arrives: PGlite queues statements in call order, and the
    // adapter's lock orders transactions against plain statements.
    run(m).finally(() => {
      // The statement's bytes are this thread's own copy or were moved here: PGlite has read them.
      if (m.op === "query") for (const p of m.params ?? []) if (p instanceof Uint8Array) freeBytes(p)
    }).then(
      (value) => port.postMessage({ id: m.id, ok: true, value }),
      (e: unknown) => port.postMessage({ id: m.id, ok: false, error: errorFields(e) }),
    )
  })
  port.postMessage({ ready: true })
} catch (e) {
  port.postMessage({ ready: false, error: errorFields(e) })
}
