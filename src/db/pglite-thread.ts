/**
 * The embedded database on a thread of its own: PGlite (Postgres compiled to WebAssembly) runs
 * every statement synchronously on the thread that owns it, so on the event loop each statement
 * held up every HTTP request and SMTP session for its whole run. Measured before this existed,
 * under inbound mail on PGlite: 65 % of the event loop's busy time was PGlite's (an ingest batch
 * commit took it for ~7–10 ms at a time; bench/REPORT.md, MX ingest). Here the event loop only
 * posts statements and reads answers; ./pglite-worker.ts opens and runs the database.
 *
 * The same ConnectionSource as the in-process adapter (./pglite.ts), with the same guarantees:
 * statements run in the order they were asked, a reserved connection holds every other
 * statement back until it is released, and notifications (pg.listen) arrive before the answer of
 * the statement whose commit sent them (the port keeps the worker's order).
 *
 * If the thread dies, every statement waiting for it fails, and so does every later one: the
 * database is gone and /readyz says so.
 */
import { MessageChannel, Worker } from "node:worker_threads"
import type { Row } from "../../effects/ports/Database.ts"
import type { ConnectionSource, Reserved } from "./connection.ts"
import { byteaInBinary } from "./pg-wire.ts"
import type { PgliteOptions } from "./pglite.ts"
import { KeptBatch } from "../../effects/ingest/batch-parameters.ts"
import type { HostPort } from "../ingest/prepare-host.ts"
import { siblingModule } from "../module-url.ts"

const WORKER_URL = siblingModule("./pglite-worker.ts", import.meta.url)

type Answer =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: Record<string, unknown> }
type FromWorker = Answer | { readonly notify: string; readonly payload: string } | { readonly ready: boolean; readonly error?: Record<string, unknown> }

/** A driver error rebuilt on this side: message, SQLSTATE `code`, `constraint` and the rest as they were. */
const rebuilt = (fields: Record<string, unknown>): Error => Object.assign(new Error(String(fields.message)), fields)

export interface PgliteThread {
  readonly source: ConnectionSource
  /** Calls `onPayload` for each notification on `channel`; resolves once listening. */
  readonly listen: (channel: string, onPayload: (payload: string) => void) => Promise<() => Promise<void>>
  readonly close: () => Promise<void>
  /**
   * A new port whose prepare jobs this thread serves beside the database (src/ingest/prepare-host.ts),
   * keeping what they prepared for the statements that name it by `key` (src/ingest/kept-messages.ts);
   * undefined once the thread is gone. The port closes when the thread does.
   */
  readonly preparePort: () => HostPort | undefined
}

/**
 * Bytes a caller handed over (`bytea(n, bytes, true)`): moved to the thread with the statement
 * rather than copied. An ingest batch's bytes are megabytes under large mail, made for the one
 * statement; a copy was one more buffer per batch for the thread's garbage collector to find
 * (bench/REPORT.md, MX ingest).
 */
class HandedOver {
  readonly bytes: Uint8Array
  constructor(bytes: Uint8Array) {
    this.bytes = bytes
  }
}

/** Whether `bytes` is the whole of its ArrayBuffer (a pooled Buffer's is shared: never moved). */
const ownsItsBuffer = (bytes: Uint8Array) =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer

/** Opens the database on its own thread; rejects as the in-process adapter would (locked, unreadable). */
export const openPgliteThread = (options: PgliteOptions, workerUrl: URL = WORKER_URL): Promise<PgliteThread> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(workerUrl, { workerData: options })
    const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
    const listeners = new Map<string, (payload: string) => void>()
    let nextId = 0
    let nextTx = 0
    let nextPortKey = 0
    let gone: Error | undefined
    let opened = false

    const ask = (request: Record<string, unknown>, transfer: ReadonlyArray<ArrayBuffer> = []): Promise<unknown> =>
      new Promise((resolve, reject) => {
        if (gone) return reject(gone)
        const id = nextId++
        waiting.set(id, { resolve, reject })
        worker.postMessage({ ...request, id }, transfer as Array<ArrayBuffer>)
      })

    const fail = (e: Error) => {
      if (gone) return
      gone = e
      for (const w of waiting.values()) w.reject(e)
      waiting.clear()
      if (!opened) reject(e)
    }

    worker.on("message", (m: FromWorker) => {
      if ("notify" in m) return listeners.get(m.notify)?.(m.payload)
      if ("ready" in m) {
        if (!m.ready) return fail(rebuilt(m.error ?? { message: "the embedded database did not open" }))
        opened = true
        return resolve(thread)
      }
      const w = waiting.get(m.id)
      waiting.delete(m.id)
      if (!w) return
      m.ok ? w.resolve(m.value) : w.reject(rebuilt(m.error))
    })
    worker.on("error", (e) => fail(e))
    worker.on("exit", (code) => fail(new Error(`the embedded database's thread exited with code ${code}`)))

    const query = (text: string, params?: ReadonlyArray<unknown>, tx?: number) => {
      // An ingest batch naming messages kept on the thread: the thread builds its parameters.
      if (params?.[0] instanceof KeptBatch) return ask({ op: "query", text, kept: params[0], tx }) as Promise<Array<Row>>
      const moved = params?.filter((p): p is HandedOver => p instanceof HandedOver) ?? []
      if (moved.length === 0) return ask({ op: "query", text, params, tx }) as Promise<Array<Row>>
      return ask(
        { op: "query", text, params: params!.map((p) => (p instanceof HandedOver ? p.bytes : p)), tx },
        moved.map((p) => p.bytes.buffer as ArrayBuffer),
      ) as Promise<Array<Row>>
    }
    const exec = async (script: string, tx?: number) => void (await ask({ op: "exec", script, tx }))

    const source: ConnectionSource = {
      dialect: "pglite",
      bytea: (n, bytes, handOver) => (handOver && ownsItsBuffer(bytes) ? { sql: `$${n}::bytea`, value: new HandedOver(bytes) } : byteaInBinary(n, bytes)),
      query: (text, params) => query(text, params),
      exec: (script) => exec(script),
      // No round trip to take or give back the connection: the thread queues the transaction's
      // statements behind its reservation. Waiting for each (2 of them per transaction) held the
      // database locked and idle while answers crossed the threads: under inbound mail with
      // webhooks, a delivery worker's claim took ~25 ms and deliveries fell seconds behind.
      reserve: async (): Promise<Reserved> => {
        if (gone) throw gone
        const tx = nextTx++
        worker.postMessage({ op: "reserve", tx })
        return {
          connection: { query: (text, params) => query(text, params, tx), exec: (script) => exec(script, tx) },
          release: async () => void (gone || worker.postMessage({ op: "release", tx })),
        }
      },
    }

    const thread: PgliteThread = {
      source,
      preparePort: () => {
        if (gone) return undefined
        const { port1, port2 } = new MessageChannel()
        const key = nextPortKey++
        worker.postMessage({ op: "serve-prepare", port: port2, key }, [port2])
        return { port: port1, key }
      },
      listen: async (channel, onPayload) => {
        listeners.set(channel, onPayload)
        await ask({ op: "listen", channel })
        return async () => {
          listeners.delete(channel)
          await ask({ op: "unlisten", channel }).catch(() => undefined)
        }
      },
      close: async () => {
        if (!gone) await ask({ op: "close" }).catch(() => undefined)
        worker.removeAllListeners("exit")
        fail(new Error("the embedded database is closed"))
        await worker.terminate()
      },
    }
  })
