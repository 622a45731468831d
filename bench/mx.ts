/**
 * MX ingest benchmark (issue 9). Load comes from postfix `smtp-source` (separate processes); the
 * service runs as its own process (as `npm start` runs it, PGlite or PostgreSQL), and in the same run
 * two peers take the same load: `smtp-sink` (the ceiling) and a bare smtp-server + mailparser
 * that discards (bench/mx-peer.ts). The service does everything for real: SPF/DKIM/DMARC against
 * a loopback DNS server, parsing, storing and charging 5 TZS per message.
 *
 * Reported per case: msgs/s, the ratio to the mean of the discarding peer's runs just before and
 * just after it (driven the same way: one smtp-source process per account, and the same probe
 * session riding along with the load, from this process, its messages counted in neither rate),
 * p99 end-of-DATA → 250 (that probe's), the service's CPU and peak RSS (VmHWM; with
 * WEB_CONCURRENCY the sum over the primary and its workers; PostgreSQL's own memory is not in it),
 * and separately accepted → webhook-received latency at 200 msgs/s.
 *
 *   npm run bench -- mx                       # every case, PGlite and PostgreSQL
 *   BENCH_QUICK=1 npm run bench -- mx         # fewer messages
 *   BENCH_ENGINES=pglite BENCH_CASES=reuse npm run bench -- mx
 *   BENCH_DATABASE_URL=postgres://…           # the server for the PostgreSQL cases (default: the CI one)
 *   BENCH_PROFILE=/tmp/prof npm run bench -- mx  # the service runs with --cpu-prof into that directory
 *   BENCH_ACCOUNTS=1 BENCH_PEERS=0 BENCH_SERVICE_LOG=1  # one account count, no peers, print the service output
 *   BENCH_NODE_FLAGS="--max-semi-space-size=4"        # node/V8 flags for the service process
 *   BENCH_RUNTIME=deno                                # the service on Deno 2 (`deno run -A src/main.ts`) instead of Node
 *   BENCH_SERVICE_LOG_FILE=/tmp/svc.log               # all the service's output to a file (BENCH_SERVICE_LOG keeps a tail)
 *   BENCH_SEED_SQL="DROP INDEX …"                     # one statement run on the service's database after seeding
 *                                             # (measurement only: what a dropped index, foreign key or function variant is worth)
 *   BENCH_STAGES=1 BENCH_CASES=once …                 # the probe times each step of one-message sessions (diagnostic)
 *   BENCH_KEEP=1 BENCH_ENGINES=pglite …               # keep the service's DATA_DIR (PGlite: its database) after its run
 *   BENCH_ENDS=1 BENCH_ACCOUNTS=20 …                  # when each smtp-source process of a run ended (ms from its start)
 *   bench/ab.sh DIR_A DIR_B postgres large 4          # interleaved A/B pairs of one case (two checkouts or settings)
 *   BENCH_REPEAT=7 BENCH_CASES=reuse BENCH_ENGINES=postgres BENCH_ACCOUNTS=1 npm run bench -- mx
 *                                             # peer, service, peer, … seven times: each ratio, then their median
 */
import { ConfigProvider, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Billing } from "../effects/billing/service.ts"
import { Database } from "../effects/ports/Database.ts"
import { randomHexSync } from "../effects/shared/crypto.ts"
import { scratchDatabase } from "./scratch-database.ts"
import { Webhooks } from "../effects/webhooks/service.ts"
import { loadSettings } from "../src/config.ts"
import { openPglite } from "../src/db/pglite.ts"
import { openPostgres } from "../src/db/postgres.ts"
import { quietLoggerLayer } from "../src/logger.ts"
import { makeRuntime } from "../src/runtime.ts"
import { startDnsServer } from "../test/support/dns-server.ts"
import { freePort } from "../test/support/free-port.ts"
import { cpuSeconds, pacedSender, peakRssMiB, postgresCpuSeconds, probe, quantile, run, smtpSource, stageProbe, waitUntil, webhookReceiver } from "./mx-support.ts"

type Engine = "pglite" | "postgres"
const QUICK = process.env.BENCH_QUICK === "1"
const PG_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const ENGINES = (process.env.BENCH_ENGINES ?? "pglite,postgres").split(",") as Array<Engine>
/** BENCH_SCALE=3: three times the messages per case (steadier figures for A/B runs). */
const scale = (n: number) => Math.ceil((QUICK ? n / 4 : n) * Number(process.env.BENCH_SCALE ?? 1))
/**
 * BENCH_REPEAT=N: each service run N times, alternating with the discarding peer (each peer run is
 * the "after" of one service run and the "before" of the next), then the median of the N ratios
 * (the upper of the middle two when N is even).
 * On this kind of machine one ratio moves ±15 % between identical runs (bench/REPORT.md, MX
 * ingest): a line near a result needs the spread, not one draw.
 */
const REPEAT = Math.max(1, Number(process.env.BENCH_REPEAT ?? 1))
/** Account counts of the service runs (default both: 1 and 20). */
const ACCOUNTS = (process.env.BENCH_ACCOUNTS ?? "1,20").split(",").map(Number)
/** BENCH_PEERS=0 skips the peers (the ratio then needs a peer figure from another run). */
const PEERS = process.env.BENCH_PEERS !== "0"
/** BENCH_SERVICE_LOG=1 prints what the service wrote (its warnings, any diagnostics). */
const SERVICE_LOG = process.env.BENCH_SERVICE_LOG === "1"
/** BENCH_SERVICE_LOG_FILE=/tmp/svc.log: the service writes all its output there (untruncated, e.g. --trace-gc-nvp). */
const SERVICE_LOG_FILE = process.env.BENCH_SERVICE_LOG_FILE
/** BENCH_SERVICE_ENV='{"INGEST_THREADS":"0"}': settings added to the service's environment. */
const SERVICE_ENV = JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") as Record<string, string>
/**
 * BENCH_STAGES=1: on the one-message load the probe (service and peer alike) opens a connection
 * per message and prints each step's wait (`stageProbe`); its p99 is then that session's.
 * Diagnostic only: the reported ratios are taken with the default probe.
 */
const STAGES = process.env.BENCH_STAGES === "1"
/** The probe beside a run of `load` (see BENCH_STAGES). */
const probeFor = (load: { readonly reuse: boolean }) => (STAGES && !load.reuse ? stageProbe : probe)
/** BENCH_STAGES: prints what the stage probe saw (nothing for the default probe). */
const showStages = (p: { readonly summary: () => string }) => STAGES && p.summary() && console.log(`stages (p50/p90 ms): ${p.summary()}`)
/** BENCH_KEEP=1: the service's DATA_DIR (on PGlite, its database too) is left in place after its run and printed, to look at its files. */
const KEEP = process.env.BENCH_KEEP === "1"

/**
 * The loads. A run's rate is its messages over the whole smtp-source run, which holds a fixed
 * part: starting the processes, the first wave of sessions all at once, the last round draining.
 * The discarding peer takes twice the service's messages (`peerRun`), so at equal speed a run
 * that is short for the service weighs that part on the service more. With one message per
 * connection the two are nearly as fast, and the service's rate rose with the run's length:
 * 1,362 / 1,438 / 1,544 msgs/s at 2,000 / 4,000 / 8,000 messages, the peer's 1,537 / 1,663 /
 * 1,656 at 4,000 / 8,000 / 16,000 (PostgreSQL, 20 accounts, means of four and six runs). At
 * 2,000 the ratio was 0.886; at 8,000 it is 0.932, as at equal counts (0.928 at 8,000 each):
 * bench/REPORT.md, MX ingest, thirty-eighth session.
 */
const LOADS = [
  { key: "reuse", label: "2 KiB, 20 sessions reusing connections", size: 2048, sessions: 20, reuse: true, messages: scale(4000) },
  { key: "once", label: "2 KiB, 200 sessions, 1 message each", size: 2048, sessions: 200, reuse: false, messages: scale(8000) },
  { key: "large", label: "100 KiB, 20 sessions", size: 100 * 1024, sessions: 20, reuse: true, messages: scale(800) },
].filter((l) => !process.env.BENCH_CASES || process.env.BENCH_CASES.split(",").includes(l.key))

const root = path.join(path.dirname(new URL(import.meta.url).pathname), "..")
const dns = await startDnsServer({
  "sender.example": { TXT: ["v=spf1 ip4:127.0.0.1 -all"] },
  "_dmarc.sender.example": { TXT: ["v=DMARC1; p=none"] },
})
// TTLs as real zones publish them (the test server's default is 1 s and negative answers without
// an SOA, which would make every message ask again): the service's DNS cache then works as it
// does in production, and the questions it still asks are counted per run.
dns.ttl("sender.example", 300)
dns.ttl("_dmarc.sender.example", 300)
dns.negativeTtl(300)

/** The service on `engine`, seeded with `accounts` funded accounts (one address each) before it starts. */
const startService = async (engine: Engine, accounts: number, webhookUrl?: string) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-mx-"))
  // Every listener on a port of its own (SANDBOX_SMTPS_PORT's 2465 too): a service still stopping,
  // or one left behind by a bench that died, must not make the next run's start fail.
  const [httpPort, smtpPort, sandboxPort, smtpsPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const scratch = await scratchDatabase(engine, PG_URL, "bench")
  const databaseUrl = scratch.url

  const env: Record<string, string> = {
    PORT: String(httpPort),
    SMTP_PORT: String(smtpPort),
    SANDBOX_SMTP_PORT: String(sandboxPort),
    SANDBOX_SMTPS_PORT: String(smtpsPort),
    DATA_DIR: dataDir,
    DNS_SERVERS: dns.address,
    LOG_LEVEL: "warn",
    JWT_SECRET: randomHexSync(32),
    SECRETS_KEY: randomHexSync(32),
    PAYMENT_WEBHOOK_SECRET: randomHexSync(16),
    SMTP_MAX_SESSIONS_PER_IP: "1000",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...SERVICE_ENV,
  }
  const settings = await Effect.runPromise(loadSettings(ConfigProvider.fromEnv({ env })))
  const seeding = makeRuntime(settings, { workers: false, logger: quietLoggerLayer })
  const addresses = await seeding.runPromise(Effect.gen(function*() {
    const db = yield* Database
    const out: Array<string> = []
    for (let i = 0; i < accounts; i++) {
      const [user] = yield* db.query<{ id: number }>(
        "INSERT INTO users (name, email, email_verified) VALUES ($1, $2, true) RETURNING id",
        [`bench ${i}`, `bench${i}@example.co.tz`],
      )
      const [address] = yield* db.query<{ id: number }>("INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, $2) RETURNING id", [
        user!.id,
        `bench${i}`,
      ])
      yield* Billing.use((b) => b.credit({ userId: user!.id, amount: 100_000_000, kind: "credit", reference: { type: "bench" } }))
      if (webhookUrl) yield* Webhooks.use((w) => w.create(user!.id, { address_id: address!.id, url: webhookUrl }))
      out.push(`bench${i}@${settings.platformDomain}`)
    }
    // A measurement's change to the schema (header), made before the service opens the database.
    if (process.env.BENCH_SEED_SQL) yield* db.query(process.env.BENCH_SEED_SQL)
    return out
  }) as Effect.Effect<Array<string>, never, never>)
  await seeding.dispose()

  const profile = process.env.BENCH_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []
  const flags = process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(" ") : []
  const entry = path.resolve(root, process.env.BENCH_ENTRY ?? "src/main.ts")
  const proc = process.env.BENCH_RUNTIME === "deno"
    ? run(path.join(root, "node_modules/deno/deno"), ["run", "-A", ...flags, entry], env, SERVICE_LOG_FILE)
    : run(process.execPath, [...flags, ...profile, entry], env, SERVICE_LOG_FILE)
  await waitUntil(async () => {
    if (proc.child.exitCode !== null) throw new Error(`the service exited: ${proc.output()}`)
    return fetch(`http://127.0.0.1:${httpPort}/readyz`).then((r) => r.ok, () => false)
  }, 60_000, "the service")
  return {
    smtpPort,
    addresses,
    pid: proc.child.pid!,
    /** Stops the service and counts what it stored. */
    stop: async (): Promise<{ stored: number; ledger: number }> => {
      proc.child.kill("SIGTERM")
      await proc.exited
      if (SERVICE_LOG) console.log(proc.output())
      const count = "SELECT (SELECT count(*) FROM inbound_messages)::int8 AS stored, (SELECT count(*) FROM ledger_entries WHERE kind = 'debit')::int8 AS ledger"
      let row: { stored: number; ledger: number }
      if (databaseUrl) {
        const c = openPostgres({ url: databaseUrl, max: 1 })
        row = (await c.source.query(count))[0] as typeof row
        await c.close()
      } else {
        const c = await openPglite({ dataDir })
        row = (await c.source.query(count))[0] as typeof row
        await c.close()
      }
      await scratch.drop()
      if (KEEP) console.log(`kept ${dataDir}`)
      else fs.rmSync(dataDir, { recursive: true, force: true })
      return row
    },
  }
}

/** A peer process taking the same load: the ceiling (smtp-sink) or the discarding smtp-server. */
const startPeer = async (kind: "sink" | "discard") => {
  const port = await freePort()
  const proc = kind === "sink"
    ? run("/usr/sbin/smtp-sink", ["-u", "nobody", "-m", "1000", `127.0.0.1:${port}`, "1024"])
    : run(process.execPath, [path.join(root, "bench/mx-peer.ts"), String(port)])
  await waitUntil(() => proc.output().includes("ready") || kind === "sink", 10_000, kind)
  await new Promise((r) => setTimeout(r, 300))
  return { port, pid: proc.child.pid!, stop: async () => (proc.child.kill("SIGTERM"), await proc.exited) }
}

interface Row {
  readonly load: string
  readonly target: string
  readonly msgsPerSecond: number
  readonly ratio?: number
  readonly p99?: number
  /** Messages the probe session sent beside the load (in neither rate). */
  readonly probed?: number
  readonly rssMiB?: number
  /** CPU of the process under test (user + system) per message taken. */
  readonly cpuMsPerMessage?: number
  /** CPU of the PostgreSQL server processes per message (PostgreSQL cases). */
  readonly dbCpuMsPerMessage?: number
  readonly dnsQuestions?: number
  readonly note?: string
}
const rows: Array<Row> = []
const show = (r: Row) => {
  rows.push(r)
  console.log(JSON.stringify(r))
}

/**
 * Messages sent to each server (peer or service) before its measured run, the same load shape:
 * a server is measured warm (JIT, connection pools, prepare threads started, caches filled), as it
 * runs in production; a cold start would weigh on short runs and on the service more than on a
 * peer with nothing to start. Counted in the service's stored/charged check, not in its rate.
 */
const warmup = (load: (typeof LOADS)[number]) => ({
  ...load,
  messages: process.env.BENCH_WARMUP ? Number(process.env.BENCH_WARMUP) : Math.max(100, load.sessions * 2, Math.round(load.messages / 2)),
})

/**
 * One peer's run of `load`, driven as the service's run next to it is: the same smtp-source
 * processes (one per account), sessions and messages. Answers its msgs/s.
 */
const peerRun = async (kind: "sink" | "discard", load: (typeof LOADS)[number], accounts: number, when: "before" | "after" = "before") => {
  const peer = await startPeer(kind)
  const recipients = Array.from({ length: accounts }, (_, i) => `bench${i}@peer.localhost`)
  const messages = load.messages * (kind === "sink" ? 4 : 2)
  await smtpSource({ port: peer.port, recipients, ...warmup(load) })
  const cpu0 = cpuSeconds(peer.pid)
  // The same probe session as beside the service (see there): the same extra session, the same
  // client beside it on the same cores, its messages in neither rate.
  const p = probeFor(load)(peer.port, recipients[0]!, load.size)
  const seconds = await smtpSource({ port: peer.port, recipients, ...load, messages })
  const probed = await p.stop()
  const rate = messages / seconds
  show({
    load: load.label,
    target: kind === "sink" ? "smtp-sink" : `smtp-server + mailparser (discard), ${when} ${accounts} account${accounts > 1 ? "s" : ""}`,
    msgsPerSecond: Math.round(rate),
    p99: Number(quantile(p.samples, 0.99).toFixed(1)),
    probed,
    cpuMsPerMessage: Number(((cpuSeconds(peer.pid) - cpu0) * 1000 / (messages + probed)).toFixed(2)),
    rssMiB: peakRssMiB(peer.pid),
  })
  showStages(p)
  await peer.stop()
  return rate
}

/** With BENCH_REPEAT: each case's ratios, for the medians at the end. */
const repeated: Array<{ readonly label: string; readonly ratios: Array<number> }> = []

for (const load of LOADS) {
  if (PEERS) await peerRun("sink", load, 1)
  for (const engine of ENGINES) {
    for (const accounts of ACCOUNTS) {
      // The discarding peer runs right before and right after each service run, and the ratio
      // is to the mean of the two: this machine's speed drifts by ±20 % within minutes, and a
      // ratio to one peer run several runs earlier carried that drift (bench/REPORT.md, MX
      // ingest, 2026-11-27 eighth session).
      let before = PEERS ? await peerRun("discard", load, accounts, "before") : undefined
      const ratios: Array<number> = []
      for (let round = 0; round < REPEAT; round++) {
        const service = await startService(engine, accounts)
        const warm = warmup(load)
        await smtpSource({ port: service.smtpPort, recipients: service.addresses, ...warm })
        const asked = dns.queries()
        const cpu0 = cpuSeconds(service.pid)
        const db0 = postgresCpuSeconds()
        const p = probeFor(load)(service.smtpPort, service.addresses[0]!, load.size)
        const seconds = await smtpSource({ port: service.smtpPort, recipients: service.addresses, ...load })
        const probed = await p.stop()
        showStages(p)
        const cpu = cpuSeconds(service.pid) - cpu0
        const dbCpu = postgresCpuSeconds() - db0
        const rss = peakRssMiB(service.pid)
        const { stored, ledger } = await service.stop()
        const expected = warm.messages + load.messages + probed
        const rate = load.messages / seconds
        const after = before === undefined ? undefined : await peerRun("discard", load, accounts, "after")
        const peer = before === undefined || after === undefined ? undefined : (before + after) / 2
        if (peer) ratios.push(rate / peer)
        before = after
        show({
          load: load.label,
          target: `service, ${engine}, ${accounts} account${accounts > 1 ? "s" : ""}`,
          msgsPerSecond: Math.round(rate),
          ...(peer ? { ratio: Number((rate / peer).toFixed(2)) } : {}),
          p99: Number(quantile(p.samples, 0.99).toFixed(1)),
          probed,
          cpuMsPerMessage: Number((cpu * 1000 / (load.messages + probed)).toFixed(2)),
          ...(engine === "postgres" ? { dbCpuMsPerMessage: Number((dbCpu * 1000 / (load.messages + probed)).toFixed(2)) } : {}),
          rssMiB: rss,
          dnsQuestions: dns.queries() - asked,
          ...(stored !== expected || ledger !== expected ? { note: `stored ${stored}, ledger ${ledger}, expected ${expected}` } : {}),
        })
      }
      if (REPEAT > 1 && ratios.length > 0) repeated.push({ label: `${load.label}, ${engine}, ${accounts} account${accounts > 1 ? "s" : ""}`, ratios })
    }
  }
}

// accepted → webhook received, at 200 msgs/s.
const latency: Array<string> = []
if (!process.env.BENCH_CASES || process.env.BENCH_CASES.split(",").includes("webhook")) {
  for (const engine of ENGINES) {
    const receiver = await webhookReceiver()
    const service = await startService(engine, 1, receiver.url)
    const accepted = await pacedSender(service.smtpPort, service.addresses[0]!, 200, QUICK ? 5 : 10)
    await new Promise((r) => setTimeout(r, 2_000))
    const lags = [...accepted].flatMap(([id, at]) => (receiver.received.has(id) ? [receiver.received.get(id)! - at] : []))
    const rss = peakRssMiB(service.pid)
    await service.stop()
    await receiver.close()
    const line = `accepted → webhook received at 200 msgs/s, ${engine}: ${lags.length}/${accepted.size} delivered, ` +
      `p50 ${quantile(lags, 0.5).toFixed(1)} ms, p99 ${quantile(lags, 0.99).toFixed(1)} ms, max ${quantile(lags, 1).toFixed(1)} ms; peak RSS ${rss} MiB`
    latency.push(line)
    console.log(line)
  }
}

await dns.close()
console.log(`\nload average at the end: ${os.loadavg().map((l) => l.toFixed(1)).join(" ")} (${os.cpus().length} CPUs)`)
console.log("\n| load | target | msgs/s | ratio to discarding peer | CPU ms/msg | PostgreSQL CPU ms/msg | p99 end-of-DATA → 250 (ms) | peak RSS (MiB) |")
console.log("|---|---|---|---|---|---|---|---|")
for (const r of rows) {
  console.log(
    `| ${r.load} | ${r.target} | ${r.msgsPerSecond} | ${r.ratio ?? ""} | ${r.cpuMsPerMessage ?? ""} | ${r.dbCpuMsPerMessage ?? ""} | ${r.p99 ?? ""} | ${
      r.rssMiB ?? ""
    } |${r.note ? ` ${r.note}` : ""}`,
  )
}
for (const l of latency) console.log(`\n${l}`)
for (const r of repeated) {
  console.log(`\n${r.label}: ratio median ${quantile(r.ratios, 0.5).toFixed(2)} over ${r.ratios.length} runs (${r.ratios.map((x) => x.toFixed(2)).join(", ")})`)
}
