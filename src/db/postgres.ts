/**
 * PostgreSQL server through the `postgres` client, used when DATABASE_URL is set.
 *
 * Statements outside transactions run on a few **lanes**: connections of their own that pipeline
 * (./statement-lanes.ts). postgres.js writes what a lane was given in one tick with one socket
 * write, and the server answers in one read; one statement per connection cost a loopback write
 * and read per statement, ~30 % of the event loop's time on GET /api/inbound/messages/{id}.
 * Two lanes against sixteen pooled connections, same run: ~2× the requests/s at ~60 % of the
 * CPU per request (bench/REPORT.md, 2026-11-26). A lane takes a statement only while what it
 * holds is a few ms of work at its recent pace and its oldest has not run long; otherwise the
 * statement goes to the pool, one per connection, as before (slow statements side by side).
 *
 * The pool (`max` less the lanes) serves transactions and the lanes' overflow. bench/REPORT.md
 * ("HTTP API (issue 11)") measured postgres@3.4's pool on this machine: with 50 concurrent
 * requests, 10–16 connections beat 64 by ~1.5x (the server runs on the same two cores; every
 * extra backend competes for them). Several processes (WEB_CONCURRENCY) each open their own:
 * keep `max` × processes under the server's max_connections.
 */
import postgres from "postgres"
import type { ByteaParameter, Row } from "../../effects/ports/Database.ts"
import { freeBytes } from "../../effects/shared/free-bytes.ts"
import { fifo } from "../../effects/shared/fifo.ts"
import type { ConnectionSource } from "./connection.ts"
import { type LaneOptions, statementLanes } from "./statement-lanes.ts"

export interface PostgresOptions {
  readonly url: string
  /** Connections in all, lanes included (default 16). */
  readonly max?: number
  /** Of those, lanes for statements outside transactions (default 2 when `max` ≥ 4, else 0). */
  readonly lanes?: number
  /** How the lanes choose (./statement-lanes.ts; tests pin them). */
  readonly laneOptions?: LaneOptions
  /** Schema to work in (tests isolate each run in its own). */
  readonly searchPath?: string
}

/**
 * Statements whose parameters are larger than this go to the pool, never a lane: an ingest batch
 * or a send with attachments is megabytes to write and milliseconds to run, and every statement
 * pipelined behind it on its lane would wait for both.
 */
export const LANE_MAX_PARAMETER_BYTES = 16 * 1024

/** The parameters' size as sent (text length, or bytes), stopping once past LANE_MAX_PARAMETER_BYTES. */
const bulky = (params?: ReadonlyArray<unknown>): boolean => {
  if (!params) return false
  let size = 0
  for (const p of params) {
    size += typeof p === "string" ? p.length : ArrayBuffer.isView(p) ? p.byteLength : 0
    if (size > LANE_MAX_PARAMETER_BYTES) return true
  }
  return false
}

/** Distinct statement texts a process prepares at most; later new texts run unnamed. */
export const MAX_PREPARED_TEXTS = 1_000

/**
 * Which statements run as named prepared statements. postgres.js runs an unnamed statement
 * with parameters in two round trips (Parse + Describe first, to learn the parameter types, then
 * Bind + Execute) and the server plans it every time; a prepared one is described once per
 * connection, then one round trip with a kept plan. Measured on GET /api/inbound/messages/{id}:
 * see bench/REPORT.md. Each connection keeps its statements for good, so the number of distinct
 * texts is capped: SQL built with a varying part (an `IN` list's length) cannot grow it without bound.
 */
const preparedTexts = (max = MAX_PREPARED_TEXTS) => {
  const known = new Set<string>()
  return (text: string): boolean => {
    if (known.has(text)) return true
    if (known.size >= max) return false
    known.add(text)
    return true
  }
}

/**
 * Lets at most `max` statements at a time onto the pool's `max` connections, less those held by
 * transactions; the rest wait here in arrival order. postgres@3.4.9 decays when more statements
 * are in flight than it has free connections: it pipelines them onto busy connections, and its
 * internal queue (src/queue.js) leaves a hole per `shift()` that every later `remove()` scans until
 * the queue drains, which under sustained load it never does. Measured with GET
 * /api/inbound/messages/{id} at 50 connections: 12.4k → 8.0k req/s over five 5 s rounds (CPU per
 * request 90 → 133 µs); with this in front, flat (bench/REPORT.md).
 *
 * A transaction's connection is counted while it is held (`hold`), never waited for: a
 * transaction that waited here behind statements could deadlock with code that runs a statement
 * on the pool while it holds a transaction.
 */
export const admission = (max: number) => {
  let running = 0
  let held = 0
  const waiting = fifo<() => void>()
  const pump = () => {
    while (waiting.size() > 0 && running + held < max) {
      running++
      waiting.shift()!()
    }
  }
  return {
    run: async <A>(call: () => Promise<A>): Promise<A> => {
      if (waiting.size() === 0 && running + held < max) running++
      else await new Promise<void>((resolve) => waiting.push(resolve))
      try {
        return await call()
      } finally {
        running--
        pump()
      }
    },
    /** Counts a connection taken for a transaction; the returned function gives it back. */
    hold: (): (() => void) => {
      held++
      let given = false
      return () => {
        if (given) return
        given = true
        held--
        pump()
      }
    },
    /** Statements running and waiting (tests). */
    state: () => ({ running, held, waiting: waiting.size() }),
  }
}

/** `v`'s bytes as a Buffer over the same memory (a string or ArrayBuffer as postgres.js takes them). */
const bytesView = (v: unknown): Buffer =>
  ArrayBuffer.isView(v)
    ? Buffer.from(v.buffer, v.byteOffset, v.byteLength)
    : v instanceof ArrayBuffer
    ? Buffer.from(v)
    : Buffer.from(String(v))

/**
 * Bytes as base64 text that the server decodes: postgres.js sends every parameter as text, and
 * each pass over it (encoding, measuring, writing, two concatenations) costs per character, 4/3 per
 * byte here against 2 for bytea's hex. 100 KiB mail: +18 % msgs/s, 0.7 ms less CPU per message.
 */
const byteaAsBase64 = (n: number, bytes: Uint8Array, handOver?: boolean): ByteaParameter => {
  const value = bytesView(bytes).toString("base64")
  // Handed over (an ingest batch's blob): nobody reads those bytes again, only their text.
  if (handOver) freeBytes(bytes)
  return { sql: `decode($${n}::text, 'base64')`, value }
}

/**
 * Forgets what a settled postgres.js Query holds of its parameters: the arguments as given and
 * their serialised texts (`args`, `parameters`). postgres@3.4.9 keeps every Query reachable past
 * two scavenges, so each statement's parameters were promoted to the old generation and stayed
 * there until a full GC. For the MX's batch commit that was the whole batch as text (its rows'
 * JSON and its bytes' base64, ~70 KB per statement): over a third of what the event loop promoted
 * under 2 KiB mail. Alone (3,000 statements with a 30 KB text parameter, `--trace-gc-nvp`): 27 MB
 * promoted and 4.1 ms per scavenge, against 1.6–2 MB and 0.6–0.8 ms with the Query's arrays
 * dropped (bench/REPORT.md, MX ingest, 2026-11-28).
 * Nothing reads them once the Query settled: a retry (a prepared statement the server
 * invalidated) happens before it does, and our errors keep only the message and SQLSTATE.
 */
export const releaseParameters = (query: object): void => {
  // Replaced, never emptied: `args` is the caller's own array, which a retry may send again.
  const q = query as { args?: unknown; parameters?: unknown }
  if (Array.isArray(q.args)) q.args = []
  if (Array.isArray(q.parameters)) q.parameters = []
}

/**
 * Runs one statement on a postgres.js client (the pool, a lane's connection or a transaction's),
 * prepared when `prepare` says so, and releases its parameters once it settled.
 */
export const statementRunner = (
  q: { unsafe: postgres.Sql["unsafe"] },
  prepare: (text: string) => boolean,
) =>
async (text: string, params?: ReadonlyArray<unknown>): Promise<Array<Row>> => {
  const query = params && params.length > 0 ? q.unsafe(text, params as Array<never>, { prepare: prepare(text) }) : q.unsafe(text)
  try {
    return Array.from(await query) as Array<Row>
  } finally {
    releaseParameters(query)
  }
}

export const openPostgres = (options: PostgresOptions): { source: ConnectionSource; close: () => Promise<void> } => {
  const max = options.max ?? 16
  const laneCount = Math.max(0, Math.min(options.lanes ?? (max >= 4 ? 2 : 0), max - 1))
  const client = (connections: number) => postgres(options.url, {
    max: connections,
    onnotice: () => undefined,
    ...(options.searchPath ? { connection: { search_path: options.searchPath } } : {}),
    types: {
      // int8 as number (ids, money amounts stay far below 2^53) and `date` as its YYYY-MM-DD text.
      int8: { to: 20, from: [20], serialize: (v: unknown) => String(v), parse: (v: string) => Number(v) },
      // JSON parameters arrive already serialized (as with PGlite); don't encode them twice.
      json: {
        to: 114,
        from: [114, 3802],
        serialize: (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v)),
        parse: (v: string) => JSON.parse(v),
      },
      dateonly: { to: 1082, from: [1082], serialize: (v: unknown) => String(v), parse: (v: string) => v },
      // As postgres.js's own, without first copying the bytes (an ingest batch's are megabytes).
      bytea: { to: 17, from: [17], serialize: (v: unknown) => `\\x${bytesView(v).toString("hex")}`, parse: (v: string) => Buffer.from(v.slice(2), "hex") },
    },
  })
  const poolSize = max - laneCount
  const sql = client(poolSize)
  const prepare = preparedTexts()
  // Statements on the pool wait here rather than queue inside postgres.js (see `admission`);
  // a reserved connection (a transaction) is its own and runs its statements directly.
  const admit = admission(poolSize)
  const run = (q: { unsafe: typeof sql.unsafe }) => statementRunner(q, prepare)
  // Each lane is a client of one connection: postgres.js pipelines onto its only connection, and
  // with one connection its queues never keep the holes that make a larger pool decay.
  const laneClients = Array.from({ length: laneCount }, () => client(1))
  const lanes = statementLanes(laneClients.map((c) => run(c)), options.laneOptions)
  const onPool = (text: string, params?: ReadonlyArray<unknown>) => admit.run(() => run(sql)(text, params))
  const source: ConnectionSource = {
    dialect: "postgres",
    bytea: byteaAsBase64,
    query: (text, params) => (bulky(params) ? undefined : lanes.run(text, params)) ?? onPool(text, params),
    exec: (script) => admit.run(async () => void (await sql.unsafe(script))),
    reserve: async () => {
      const reserved = await sql.reserve()
      const giveBack = admit.hold()
      return {
        connection: { query: run(reserved), exec: async (script: string) => void (await reserved.unsafe(script)) },
        release: async () => {
          giveBack()
          reserved.release()
        },
      }
    },
  }
  return { source, close: async () => void (await Promise.all([sql, ...laneClients].map((c) => c.end({ timeout: 5 })))) }
}
