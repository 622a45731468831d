/**
 * MX throughput: K concurrent SMTP sessions, each sending messages back to back on one
 * connection (as MTAs do), ~2 KiB each, to one funded address. Every message goes the whole way:
 * SPF/DKIM/DMARC (against a loopback DNS server), mailparser, and the storing transaction with
 * its 5 TZS debit. Not part of `npm test`.
 *
 *   node bench/mx-throughput.ts [messages=2000] [sessions=20]
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node bench/mx-throughput.ts
 */
import { Effect, type Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Billing } from "../effects/billing/service.ts"
import { Database } from "../effects/ports/Database.ts"
import { randomHexSync } from "../effects/shared/crypto.ts"
import { loadSettings } from "../src/config.ts"
import { pgliteLayer, postgresLayer } from "../src/db/layer.ts"
import { openPostgres } from "../src/db/postgres.ts"
import { start } from "../src/runtime.ts"
import { startDnsServer } from "../test/support/dns-server.ts"
import { connectSmtp, transaction } from "../test/support/smtp-client.ts"

const TOTAL = Number(process.argv[2] ?? 2000)
const SESSIONS = Number(process.argv[3] ?? 20)
const pgUrl = process.env.BENCH_DATABASE_URL
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-mx-"))
const schema = `bench_${randomHexSync(4)}`

const dns = await startDnsServer({ "sender.example": { TXT: ["v=spf1 ip4:127.0.0.1 -all"] } })
const settings = await Effect.runPromise(loadSettings())
let database: Layer.Layer<any, any, any> = pgliteLayer({ dataDir })
let dropSchema = async () => {}
if (pgUrl) {
  const admin = openPostgres({ url: pgUrl, max: 1 })
  await admin.source.query(`CREATE SCHEMA ${schema}`)
  database = postgresLayer({ url: pgUrl, searchPath: schema, max: SESSIONS + 4 })
  dropSchema = async () => {
    await admin.source.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.close()
  }
}
const running = await start(
  { ...settings, dataDir, port: 0, smtpPort: 0, sandboxSmtpPort: 0, logLevel: "error", dnsServers: [dns.address] },
  { database, workers: false },
  { http: 0 },
)
const userId = await running.runtime.runPromise(Effect.gen(function*() {
  const db = yield* Database
  const [user] = yield* db.query<{ id: number }>("INSERT INTO users (name, email, email_verified) VALUES ('mx', 'mx@example.co.tz', true) RETURNING id")
  yield* db.query("INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, 'bench')", [user!.id])
  yield* Billing.use((b) => b.credit({ userId: user!.id, amount: TOTAL * 5, kind: "credit", reference: { type: "bench" } }))
  return user!.id
}) as Effect.Effect<number, never, never>)

const body = "Habari, hii ni ankara yako ya mwezi huu. ".repeat(40) // ~1.7 KiB
const message = (i: number) =>
  `From: Asha <asha@sender.example>\r\nTo: bench@${settings.platformDomain}\r\nSubject: Ankara ${i}\r\nMessage-ID: <${i}@sender.example>\r\n` +
  `Date: ${new Date().toUTCString()}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${body}\r\n`

const mx = running.ports.mx!
let next = 0
let failed = 0
const latencies: Array<number> = []
const session = async () => {
  const smtp = await connectSmtp(mx)
  await smtp.command("EHLO bench.sender.example")
  while (next < TOTAL) {
    const i = next++
    const s = performance.now()
    const sent = await transaction(smtp, { from: "asha@sender.example", to: [`bench@${settings.platformDomain}`], raw: message(i) })
    latencies.push(performance.now() - s)
    if (sent.data?.code !== 250) failed++
  }
  await smtp.command("QUIT")
  smtp.destroy()
}
const t0 = performance.now()
await Promise.all(Array.from({ length: SESSIONS }, session))
const seconds = (performance.now() - t0) / 1000
latencies.sort((a, b) => a - b)
const [stored] = await running.runtime.runPromise(
  Database.use((db) => db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM inbound_messages WHERE user_id = $1", [userId])) as Effect.Effect<Array<{ n: number }>, never, never>,
)
console.log(
  `MX throughput (${pgUrl ? "PostgreSQL" : "PGlite"}): ${TOTAL} messages over ${SESSIONS} sessions in ${seconds.toFixed(1)} s = ` +
    `${(TOTAL / seconds).toFixed(0)} msgs/s; per message p50 ${latencies[Math.floor(latencies.length / 2)]!.toFixed(1)} ms, ` +
    `p95 ${latencies[Math.floor(latencies.length * 0.95)]!.toFixed(1)} ms; stored ${stored!.n}, failed ${failed}`,
)
await running.stop()
await dns.close()
await dropSchema()
fs.rmSync(dataDir, { recursive: true, force: true })
