/**
 * HTTP API benchmark (issue 11). `wrk` drives load as a separate process against the real
 * service (`node src/main.ts`, its own process) and, in the same run and on the same engine and
 * data, against a peer (bench/http-peer.ts): a minimal Hono app that hashes the key, reads it and
 * reads the resource (two queries) and answers the same envelope. The ratio service/peer is what
 * carries across machines; every case runs in rounds to catch throughput decay.
 *
 * Cases: GET /api/billing/balance, GET /api/inbound/messages/{id}, and the list at page 1 and
 * page 500 of an address holding 10^3 and one holding 10^6 messages (page 500 of the small one
 * uses per_page=2, its last page; the large one per_page=20, offset 9,980). Reported: req/s,
 * p50/p99 (wrk --latency), the ratio, round 5 / round 1, and the service's RSS (idle after start,
 * and at the end with its peak).
 *
 *   npm run bench -- http                            # PGlite and PostgreSQL
 *   BENCH_ENGINES=postgres BENCH_CASES=by-id npm run bench -- http
 *   BENCH_SECONDS=5 BENCH_ROUNDS=5 BENCH_CONNECTIONS=50 BENCH_LARGE=1000000
 *   BENCH_DATABASE_URL=postgres://…                  # default: the CI server
 *   BENCH_PROFILE=/tmp/prof                          # the service runs with --cpu-prof
 *   BENCH_SERVICE_ENV='{"WEB_CONCURRENCY":"2"}'      # extra environment for the service
 *   BENCH_NODE_FLAGS="--trace-gc"                    # extra node/V8 flags for the service
 *   BENCH_SERVICE_LOG_FILE=/tmp/service.log          # the service writes its whole output there
 */
import { ConfigProvider, Effect } from "effect"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Billing } from "../effects/billing/service.ts"
import { Database } from "../effects/ports/Database.ts"
import { randomHexSync } from "../effects/shared/crypto.ts"
import { scratchDatabase } from "./scratch-database.ts"
import { loadSettings } from "../src/config.ts"
import { quietLoggerLayer } from "../src/logger.ts"
import { makeRuntime } from "../src/runtime.ts"
import { freePort } from "../test/support/free-port.ts"
import { cpuSeconds, peakRssMiB, rssMiB, run, waitUntil } from "./mx-support.ts"

type Engine = "pglite" | "postgres"
const ENGINES = (process.env.BENCH_ENGINES ?? "pglite,postgres").split(",") as Array<Engine>
const PG_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const SMALL = 1_000
const LARGE = Number(process.env.BENCH_LARGE ?? 1_000_000)
const SERVICE_ENV = JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") as Record<string, string>
const execFileAsync = promisify(execFile)
const NODE_FLAGS = process.env.BENCH_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? []
const root = path.join(path.dirname(new URL(import.meta.url).pathname), "..")

interface Seeded {
  readonly key: string
  readonly small: number
  readonly large: number
  readonly messageId: number
}

/** Seeds a fresh database (PGlite in `dataDir`, or a new PostgreSQL database) before anything serves it. */
const seed = async (env: Record<string, string>): Promise<Seeded> => {
  const settings = await Effect.runPromise(loadSettings(ConfigProvider.fromEnv({ env })))
  const rt = makeRuntime(settings, { workers: false, logger: quietLoggerLayer })
  const key = `MAIL_${randomHexSync(32)}`
  const t0 = performance.now()
  const seeded = await rt.runPromise(Effect.gen(function*() {
    const db = yield* Database
    const [user] = yield* db.query<{ id: number }>("INSERT INTO users (name, email, email_verified) VALUES ('Bench', 'bench@example.co.tz', true) RETURNING id")
    const userId = user!.id
    yield* db.query("INSERT INTO api_keys (user_id, name, key_prefix, key_hash) VALUES ($1, 'bench', $2, $3)", [
      userId,
      key.slice(0, 12),
      createHash("sha256").update(key).digest("hex"),
    ])
    yield* Billing.use((b) => b.credit({ userId, amount: 5000, kind: "credit", reference: { type: "bench" } }))
    const [mime] = yield* db.query<{ id: number }>(
      "INSERT INTO inbound_mime (user_id, raw, size_bytes, message_refs) VALUES ($1, $2, 64, 1000000000) RETURNING id",
      [userId, new TextEncoder().encode("Subject: Ankara\r\n\r\nHabari, hii ni ankara yako.\r\n")],
    )
    const headers = JSON.stringify({ from: "Asha <asha@sender.example>", to: "bench@inbox.localhost", subject: "Ankara", "message-id": "<x@sender.example>" })
    const address = async (local: string, count: number) => {
      const [a] = await rt.runPromise(db.query<{ id: number }>("INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, $2) RETURNING id", [userId, local]))
      for (let done = 0; done < count; done += 50_000) {
        const n = Math.min(50_000, count - done)
        await rt.runPromise(db.query(
          `INSERT INTO inbound_messages (address_id, user_id, mime_id, from_addr, to_addr, subject, text_body, html_body, headers, is_read, received_at, expires_at, size_bytes)
           SELECT $1, $2, $3, 'Asha <asha@sender.example>', $4, 'Ankara ' || g, repeat('Habari, hii ni ankara yako. ', 8),
                  '<p>' || repeat('Habari, hii ni ankara yako. ', 8) || '</p>', $5::jsonb, g % 10 <> 0,
                  now() - (g || ' seconds')::interval, now() + interval '3650 days', 2048
             FROM generate_series($6::int, $7::int) g`,
          [a!.id, userId, mime!.id, `${local}@inbox.localhost`, headers, done + 1, done + n],
        ))
      }
      await rt.runPromise(db.query(
        `UPDATE inbound_addresses SET message_count = (SELECT count(*) FROM inbound_messages WHERE address_id = $1),
                unread_count = (SELECT count(*) FROM inbound_messages WHERE address_id = $1 AND NOT is_read) WHERE id = $1`,
        [a!.id],
      ))
      return a!.id
    }
    const small = yield* Effect.promise(() => address("small", SMALL))
    const large = yield* Effect.promise(() => address("large", LARGE))
    const [m] = yield* db.query<{ id: number }>("SELECT id FROM inbound_messages WHERE address_id = $1 ORDER BY id LIMIT 1 OFFSET 500", [small])
    // Settle the seeded rows before measuring, as a running service's data is: without this the
    // server's autovacuum (and hint-bit writes on first read) of 10^6 fresh rows ran through the
    // first cases' rounds, costing PostgreSQL CPU and the service its p99 (REPORT, 2026-11-24).
    yield* db.query("VACUUM (FREEZE, ANALYZE)")
    yield* db.query("CHECKPOINT")
    return { key, small, large, messageId: m!.id }
  }) as Effect.Effect<Seeded, never, never>)
  await rt.dispose()
  console.log(`# seeded ${SMALL.toLocaleString()} + ${LARGE.toLocaleString()} messages in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  return seeded
}

interface WrkResult {
  readonly rps: number
  /** CPU time the target process (and its children) spent per request, in microseconds. */
  readonly cpu_us: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
}

const ms = (v: string, unit: string) => Number(v) * ({ us: 0.001, ms: 1, s: 1000, m: 60_000 }[unit] ?? NaN)

/**
 * Asynchronous on purpose: while wrk runs, this process keeps draining the service's log pipe, as
 * a log collector would. (A synchronous wrk left the pipe full for the whole round: the service's
 * access-log lines piled up in its bounded buffer, tens of MB of live strings, and were dropped.)
 */
const wrk = async (url: string, key: string, pid: number, seconds = SECONDS): Promise<WrkResult> => {
  const cpuBefore = cpuSeconds(pid)
  const { stdout: out } = await execFileAsync("wrk", ["-t2", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-H", `x-api-key: ${key}`, url], { encoding: "utf8" })
  const lat = (p: string) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, "m").exec(out)
    return m ? Math.round(ms(m[1]!, m[2]!) * 100) / 100 : NaN
  }
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
  return {
    rps: Math.round(Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0)),
    cpu_us: requests ? Math.round(((cpuSeconds(pid) - cpuBefore) * 1_000_000) / requests) : NaN,
    p50: lat("50"),
    p99: lat("99"),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    errors: errors ? errors.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
  }
}

const startProc = async (args: Array<string>, env: Record<string, string>, port: number, what: string, logFile?: string) => {
  const proc = run(process.execPath, args, env, logFile)
  await waitUntil(async () => {
    if (proc.child.exitCode !== null) throw new Error(`${what} exited: ${proc.output()}`)
    return fetch(`http://127.0.0.1:${port}/api/billing/balance`).then((r) => r.status === 401 || r.ok, () => false)
  }, 120_000, what)
  return proc
}

const benchEngine = async (engine: Engine) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-http-"))
  const peerDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-http-peer-"))
  const scratch = await scratchDatabase(engine, PG_URL, "bench_http")
  const databaseUrl = scratch.url

  const [httpPort, smtpPort, sandboxPort, smtpsPort, peerPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()])
  const env: Record<string, string> = {
    PORT: String(httpPort),
    SMTP_PORT: String(smtpPort),
    SANDBOX_SMTP_PORT: String(sandboxPort),
    SANDBOX_SMTPS_PORT: String(smtpsPort),
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    JWT_SECRET: randomHexSync(32),
    SECRETS_KEY: randomHexSync(32),
    PAYMENT_WEBHOOK_SECRET: randomHexSync(16),
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...SERVICE_ENV,
  }
  try {
    const s = await seed(env)
    if (engine === "pglite") fs.cpSync(path.join(dataDir, "pg"), path.join(peerDir, "pg"), { recursive: true })
    const profile = process.env.BENCH_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []
    const service = await startProc([...profile, ...NODE_FLAGS, path.resolve(root, process.env.BENCH_ENTRY ?? "src/main.ts")], env, httpPort, "the service", process.env.BENCH_SERVICE_LOG_FILE)
    // Logs go to a pipe the benchmark drains, as they would to a collector.
    await new Promise((r) => setTimeout(r, 3000))
    const idleRss = rssMiB(service.child.pid!)
    const peer = await startProc([path.join(root, "bench/http-peer.ts")], {
      PEER_PORT: String(peerPort),
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : { PEER_PGLITE_DIR: peerDir }),
    }, peerPort, "the peer")

    const cases: Array<[string, string]> = [
      ["balance", "/api/billing/balance"],
      ["by-id", `/api/inbound/messages/${s.messageId}`],
      [`list-p1-${SMALL}`, `/api/inbound/messages?address_id=${s.small}`],
      [`list-p500-${SMALL}`, `/api/inbound/messages?address_id=${s.small}&page=500&per_page=2`],
      [`list-p1-${LARGE}`, `/api/inbound/messages?address_id=${s.large}`],
      [`list-p500-${LARGE}`, `/api/inbound/messages?address_id=${s.large}&page=500`],
    ]
    const wanted = process.env.BENCH_CASES?.split(",")
    const selected = cases.filter(([name]) => !wanted || wanted.some((w) => name.startsWith(w)))
    console.log(`## ${engine}: wrk -t2 -c${CONNECTIONS} -d${SECONDS}s, ${ROUNDS} rounds; service idle RSS ${idleRss} MiB`)
    // Warm both up once (JIT, caches, connection pools).
    const [servicePid, peerPid] = [service.child.pid!, peer.child.pid!]
    await wrk(`http://127.0.0.1:${peerPort}${selected[0]![1]}`, s.key, peerPid, 2)
    await wrk(`http://127.0.0.1:${httpPort}${selected[0]![1]}`, s.key, servicePid, 2)
    const summary: Array<Record<string, unknown>> = []
    for (const [name, p] of selected) {
      // Each case warmed up on its own path too (its route's code compiled, its statement
      // prepared): the first round of a case measured cold made its p99 (100 ms against 17–33 in
      // the later rounds, 2026-11-26).
      await wrk(`http://127.0.0.1:${peerPort}${p}`, s.key, peerPid, 1)
      await wrk(`http://127.0.0.1:${httpPort}${p}`, s.key, servicePid, 1)
      const rounds: Array<{ service: WrkResult; peer: WrkResult }> = []
      for (let round = 1; round <= ROUNDS; round++) {
        const peerResult = await wrk(`http://127.0.0.1:${peerPort}${p}`, s.key, peerPid)
        const serviceResult = await wrk(`http://127.0.0.1:${httpPort}${p}`, s.key, servicePid)
        rounds.push({ service: serviceResult, peer: peerResult })
        console.log(JSON.stringify({ engine, case: name, round, service: serviceResult, peer: peerResult, ratio: +(serviceResult.rps / peerResult.rps).toFixed(3) }))
      }
      const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
      summary.push({
        case: name,
        service_rps: median(rounds.map((r) => r.service.rps)),
        peer_rps: median(rounds.map((r) => r.peer.rps)),
        ratio: +median(rounds.map((r) => r.service.rps / r.peer.rps)).toFixed(3),
        service_p50: median(rounds.map((r) => r.service.p50)),
        service_p99: median(rounds.map((r) => r.service.p99)),
        peer_p99: median(rounds.map((r) => r.peer.p99)),
        service_cpu_us: median(rounds.map((r) => r.service.cpu_us)),
        peer_cpu_us: median(rounds.map((r) => r.peer.cpu_us)),
        round5_over_round1: +(rounds.at(-1)!.service.rps / rounds[0]!.service.rps).toFixed(3),
        non2xx: rounds.reduce((a, r) => a + r.service.non2xx + r.service.errors, 0),
      })
    }
    const endRss = rssMiB(service.child.pid!)
    const peakRss = peakRssMiB(service.child.pid!)
    console.log(`## ${engine} summary (medians over rounds); service RSS idle ${idleRss} MiB, after load ${endRss} MiB, peak ${peakRss} MiB`)
    console.table(summary)
    peer.child.kill("SIGTERM")
    service.child.kill("SIGTERM")
    await Promise.all([peer.exited, service.exited])
  } finally {
    await scratch.drop()
    fs.rmSync(dataDir, { recursive: true, force: true })
    fs.rmSync(peerDir, { recursive: true, force: true })
  }
}

for (const engine of ENGINES) await benchEngine(engine)
