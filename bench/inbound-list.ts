/**
 * Listing inbound messages at a million rows. Seeds N messages (default 1,000,000) on one
 * address plus noise on other accounts, then times the real HTTP endpoints (Hono + auth + the
 * service + the database): the newest page, the unread page, a deep page, one message, and the
 * audit export. Not part of `npm test`.
 *
 *   node bench/inbound-list.ts [N]                               # embedded PGlite (temp dir)
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node bench/inbound-list.ts [N]
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { MESSAGE_COLUMNS } from "../effects/messages/schema.ts"
import { Database } from "../effects/ports/Database.ts"
import { randomHexSync, sha256Hex } from "../effects/shared/crypto.ts"
import { loadSettings } from "../src/config.ts"
import { pgliteLayer, postgresLayer } from "../src/db/layer.ts"
import { openPostgres } from "../src/db/postgres.ts"
import { start } from "../src/runtime.ts"

const N = Number(process.argv[2] ?? 1_000_000)
const pgUrl = process.env.BENCH_DATABASE_URL
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-inbound-"))
const schema = `bench_${randomHexSync(4)}`

const settings = await Effect.runPromise(loadSettings())
let database: Layer.Layer<any, any, any> = pgliteLayer({ dataDir })
let dropSchema = async () => {}
if (pgUrl) {
  const admin = openPostgres({ url: pgUrl, max: 1 })
  await admin.source.query(`CREATE SCHEMA ${schema}`)
  database = postgresLayer({ url: pgUrl, searchPath: schema, max: 16 })
  dropSchema = async () => {
    await admin.source.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.close()
  }
}
const running = await start(
  { ...settings, dataDir, port: 0, smtpPort: 0, sandboxSmtpPort: 0, logLevel: "error" },
  { database, workers: false },
  { http: 0 },
)
const run = <A>(e: Effect.Effect<A, unknown, Database>) => running.runtime.runPromise(e as Effect.Effect<A, never, never>)
const sql = <T = Record<string, unknown>>(text: string, params: Array<unknown> = []) => run(Database.use((db) => db.query<T>(text, params)))

// --- seed -----------------------------------------------------------------------------------
const t0 = performance.now()
const key = `MAIL_${randomHexSync(32)}`
const [user] = await sql<{ id: number }>("INSERT INTO users (name, email, email_verified) VALUES ('bench', 'bench@example.co.tz', true) RETURNING id")
await sql("INSERT INTO api_keys (user_id, name, key_prefix, key_hash) VALUES ($1, 'bench', $2, $3)", [user!.id, key.slice(0, 12), await Effect.runPromise(sha256Hex(key))])
const [other] = await sql<{ id: number }>("INSERT INTO users (name, email) VALUES ('noise', 'noise@example.co.tz') RETURNING id")
const [address] = await sql<{ id: number }>("INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, 'bench') RETURNING id", [user!.id])
const [noise] = await sql<{ id: number }>("INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, 'noise') RETURNING id", [other!.id])
const headers = JSON.stringify({ from: "Asha <asha@sender.example>", to: "bench@inbox.localhost", subject: "Ankara", "message-id": "<x@sender.example>" })
const CHUNK = 50_000
const seed = async (addressId: number, userId: number, count: number) => {
  for (let done = 0; done < count; done += CHUNK) {
    const n = Math.min(CHUNK, count - done)
    // Every 10th message unread, interleaved with the noise account's rows like real traffic.
    await sql(
      `INSERT INTO inbound_messages (address_id, user_id, from_addr, to_addr, subject, text_body, headers, is_read, received_at, expires_at)
       SELECT $1, $2, 'Asha <asha@sender.example>', 'bench@inbox.localhost', 'Ankara ' || g,
              repeat('Habari, hii ni ankara yako. ', 8), $3::jsonb, g % 10 <> 0,
              now() - (g || ' seconds')::interval, now() + interval '30 days'
         FROM generate_series($4::int, $5::int) g`,
      [addressId, userId, headers, done + 1, done + n],
    )
  }
  await sql(
    `UPDATE inbound_addresses SET message_count = (SELECT count(*) FROM inbound_messages WHERE address_id = $1),
            unread_count = (SELECT count(*) FROM inbound_messages WHERE address_id = $1 AND NOT is_read) WHERE id = $1`,
    [addressId],
  )
}
await seed(address!.id, user!.id, N)
await seed(noise!.id, other!.id, Math.min(N, 100_000))
await sql("ANALYZE inbound_messages")
const seededIn = (performance.now() - t0) / 1000

// --- measure --------------------------------------------------------------------------------
const base = `http://127.0.0.1:${running.httpPort}`
const call = async (p: string) => {
  const res = await fetch(base + p, { headers: { authorization: `Bearer ${key}` } })
  const body = (await res.json()) as { success: boolean }
  if (!res.ok || !body.success) throw new Error(`${p}: ${res.status} ${JSON.stringify(body).slice(0, 200)}`)
  return body
}
const [someId] = await sql<{ id: number }>("SELECT id FROM inbound_messages WHERE address_id = $1 ORDER BY id LIMIT 1 OFFSET $2", [address!.id, Math.floor(N / 2)])
const cases: Array<[string, string]> = [
  ["page 1 (20 newest)", `/api/inbound/messages?address_id=${address!.id}`],
  ["page 1, per_page=100", `/api/inbound/messages?address_id=${address!.id}&per_page=100`],
  ["unread=true page 1", `/api/inbound/messages?address_id=${address!.id}&unread=true`],
  ["page 500 (offset 9,980)", `/api/inbound/messages?address_id=${address!.id}&page=500`],
  ["page 5000 (offset 99,980)", `/api/inbound/messages?address_id=${address!.id}&page=5000`],
  ["one message by id", `/api/inbound/messages/${someId!.id}`],
  ["audit export", "/api/compliance/audit-export"],
]
const ROUNDS = 40
console.log(`inbound list benchmark: ${N.toLocaleString()} messages on one address (+${Math.min(N, 100_000).toLocaleString()} noise), ${pgUrl ? "PostgreSQL" : "PGlite"}; seeded in ${seededIn.toFixed(1)} s`)
console.log("case".padEnd(34), "p50 ms".padStart(8), "p95 ms".padStart(8), "max ms".padStart(8))
for (const [name, p] of cases) {
  for (let i = 0; i < 3; i++) await call(p)
  const times: Array<number> = []
  for (let i = 0; i < ROUNDS; i++) {
    const s = performance.now()
    await call(p)
    times.push(performance.now() - s)
  }
  times.sort((a, b) => a - b)
  const q = (f: number) => times[Math.min(times.length - 1, Math.floor(f * times.length))]!.toFixed(1)
  console.log(name.padEnd(34), q(0.5).padStart(8), q(0.95).padStart(8), times.at(-1)!.toFixed(1).padStart(8))
}
for (const [name, where] of [["page 1", ""], ["unread page 1", "AND NOT is_read"]]) {
  const plan = await sql<{ "QUERY PLAN": string }>(
    `EXPLAIN ANALYZE SELECT ${MESSAGE_COLUMNS} FROM inbound_messages WHERE address_id = $1 ${where} ORDER BY -id LIMIT 20 OFFSET 0`,
    [address!.id],
  )
  console.log(`plan (${name}):`, plan.map((r) => r["QUERY PLAN"].trim()).join(" | "))
}

await running.stop()
await dropSchema()
fs.rmSync(dataDir, { recursive: true, force: true })
