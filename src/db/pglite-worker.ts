/**
 * The PGlite thread (see ./pglite-thread.ts): opens the embedded database here, off the event
 * loop, and runs what the main thread asks of it, in the order asked. It is plain async code (no
 * Effect); the in-process adapter (./pglite.ts) does the opening, locking and serialising.
 *
 * Messages on the port:
 *   in  {id, op: "query", text, params, tx?} | {id, op: "exec", script, tx?} | {id, op: "reserve"}
 *       | {id, op: "release", tx} | {id, op: "listen" | "unlisten", channel} | {id, op: "close"}
 *   out {ready: true} | {ready: false, error} (once, after opening)
 *       {id, ok: true, value} | {id, ok: false, error: {message, code?, constraint?, …}}
 *       {notify: channel, payload} (posted before the answer of the statement that committed it)
 */
import { parentPort, workerData } from "node:worker_threads"
import { openPglite, type PgliteOptions } from "./pglite.ts"
import type { Reserved } from "./connection.ts"

const port = parentPort!

type Request =
  | { readonly id: number; readonly op: "query"; readonly text: string; readonly params?: ReadonlyArray<unknown>; readonly tx?: number }
  | { readonly id: number; readonly op: "exec"; readonly script: string; readonly tx?: number }
  | { readonly id: number; readonly op: "reserve" }
  | { readonly id: number; readonly op: "release"; readonly tx: number }
  | { readonly id: number; readonly op: "listen" | "unlisten"; readonly channel: string }
  | { readonly id: number; readonly op: "close" }

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
  const txs = new Map<number, Reserved>()
  const unlisteners = new Map<string, () => Promise<void>>()
  let nextTx = 0

  const run = async (m: Request): Promise<unknown> => {
    switch (m.op) {
      case "query":
        return m.tx === undefined ? source.query(m.text, m.params) : txs.get(m.tx)!.connection.query(m.text, m.params)
      case "exec":
        return m.tx === undefined ? source.exec(m.script) : txs.get(m.tx)!.connection.exec(m.script)
      case "reserve": {
        const reserved = await source.reserve()
        const tx = nextTx++
        txs.set(tx, reserved)
        return tx
      }
      case "release": {
        const reserved = txs.get(m.tx)
        txs.delete(m.tx)
        return reserved?.release()
      }
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

  port.on("message", (m: Request) => {
    // Every request starts as it arrives: PGlite queues statements in call order, and the
    // adapter's lock orders transactions against plain statements.
    run(m).then(
      (value) => port.postMessage({ id: m.id, ok: true, value }),
      (e: unknown) => port.postMessage({ id: m.id, ok: false, error: errorFields(e) }),
    )
  })
  port.postMessage({ ready: true })
} catch (e) {
  port.postMessage({ ready: false, error: errorFields(e) })
}
