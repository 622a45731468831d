/**
 * PostgreSQL server through the `postgres` client, used when DATABASE_URL is set.
 *
 * Pool size: bench/REPORT.md ("HTTP API (issue 11)") measured postgres@3.4's pool on this
 * machine: with 50 concurrent requests, 10–16 connections that pipeline statements beat 64
 * connections by ~1.5x (the server runs on the same two cores; every extra backend competes for
 * them), and throughput held over five rounds with the queues' scans bounded by the pool size
 * (the decay STACK-NOTES.md describes did not reproduce). Several processes (WEB_CONCURRENCY)
 * each open their own pool: keep `max` × processes under the server's max_connections.
 */
import postgres from "postgres"
import type { Row } from "../../effects/ports/Database.ts"
import type { ConnectionSource } from "./connection.ts"

export interface PostgresOptions {
  readonly url: string
  /** Connections (default 16). */
  readonly max?: number
  /** Schema to work in (tests isolate each run in its own). */
  readonly searchPath?: string
}

export const openPostgres = (options: PostgresOptions): { source: ConnectionSource; close: () => Promise<void> } => {
  const sql = postgres(options.url, {
    max: options.max ?? 16,
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
    },
  })
  const run = (q: { unsafe: typeof sql.unsafe }) => async (text: string, params?: ReadonlyArray<unknown>) =>
    Array.from(await q.unsafe(text, (params ?? []) as Array<never>)) as Array<Row>
  const source: ConnectionSource = {
    dialect: "postgres",
    query: run(sql),
    exec: async (script) => void (await sql.unsafe(script)),
    reserve: async () => {
      const reserved = await sql.reserve()
      return {
        connection: { query: run(reserved), exec: async (script: string) => void (await reserved.unsafe(script)) },
        release: async () => reserved.release(),
      }
    },
  }
  return { source, close: () => sql.end({ timeout: 5 }) }
}
