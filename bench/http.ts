/**
 * HTTP benchmark: an authenticated Key endpoint (GET /api/billing/balance: API-key lookup,
 * account check, balance read, envelope) against a peer measured in the same run — a bare
 * Hono app answering the same envelope with no auth or database — so the ratio shows what the
 * service's own layers cost, independent of the machine.
 *
 *   npm run bench -- http            # PGlite
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench -- http
 *
 * Rounds repeat to catch throughput decay (see STACK-NOTES.md on postgres.js pool saturation).
 */
import { serve } from "@hono/node-server"
import { Effect, Layer, Option } from "effect"
import { Hono } from "hono"
import * as fs from "node:fs"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Billing } from "../effects/billing/service.ts"
import { Database } from "../effects/ports/Database.ts"
import { randomHexSync, sha256Hex } from "../effects/shared/crypto.ts"
import { loadSettings } from "../src/config.ts"
import { start } from "../src/runtime.ts"
import { loggerLayer } from "../src/logger.ts"

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

const load = async (url: string, headers: Record<string, string>) => {
  const latencies: Array<number> = []
  const until = performance.now() + SECONDS * 1000
  let errors = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < until) {
      const t = performance.now()
      const res = await fetch(url, { headers })
      await res.arrayBuffer()
      if (res.status !== 200) errors++
      latencies.push(performance.now() - t)
    }
  }))
  latencies.sort((a, b) => a - b)
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))]!.toFixed(2)
  return { rps: Math.round(latencies.length / SECONDS), p50: q(0.5), p99: q(0.99), errors }
}

const peer = async () => {
  const app = new Hono()
  app.get("/balance", (c) =>
    c.json({ success: true, data: { balance_tzs: 5000 }, request_id: `req_${randomHexSync(12)}`, timestamp: new Date().toISOString() }))
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/balance`, close: () => server.close() }
}

const main = async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-http-"))
  const settings = await Effect.runPromise(loadSettings())
  const running = await start(
    { ...settings, dataDir, port: 0, smtpPort: 0, sandboxSmtpPort: 0, logLevel: "error" },
    { logger: loggerLayer("error") as Layer.Layer<never>, workers: false },
    { http: 0 },
  )
  const key = `MAIL_${randomHexSync(32)}`
  await running.runtime.runPromise(Effect.gen(function*() {
    const db = yield* Database
    const [user] = yield* db.query<{ id: number }>("INSERT INTO users (name, email, email_verified) VALUES ('Bench', $1, true) RETURNING id", [
      `bench-${randomHexSync(4)}@example.co.tz`,
    ])
    yield* db.query("INSERT INTO api_keys (user_id, name, key_prefix, key_hash) VALUES ($1, 'bench', $2, $3)", [
      user!.id,
      key.slice(0, 12),
      yield* sha256Hex(key),
    ])
    yield* Billing.use((b) => b.credit({ userId: user!.id, amount: 5000, kind: "credit", reference: { type: "bench" } }))
  }) as Effect.Effect<void>)
  const p = await peer()
  const service = `http://127.0.0.1:${running.httpPort}/api/billing/balance`
  const engine = Option.isSome(settings.databaseUrl) ? "postgres" : "pglite"
  console.log(`# GET /api/billing/balance vs bare Hono peer — ${engine}, ${CONCURRENCY} clients, ${SECONDS}s x ${ROUNDS} rounds`)
  for (let round = 1; round <= ROUNDS; round++) {
    const peerResult = await load(p.url, {})
    const serviceResult = await load(service, { "x-api-key": key })
    console.log(JSON.stringify({
      round,
      service: serviceResult,
      peer: peerResult,
      ratio: (serviceResult.rps / peerResult.rps).toFixed(3),
      rss_mb: Math.round(process.memoryUsage().rss / 1048576),
    }))
  }
  p.close()
  await running.stop()
  fs.rmSync(dataDir, { recursive: true, force: true })
}

await main()
