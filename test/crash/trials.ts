/**
 * Crash trials: the real service on its own PostgreSQL database, killed with SIGKILL at seeded
 * random moments under a mixed load, restarted, and checked after every kill (invariants.ts).
 *
 * One trial = one kill. Most trials start the service, let the load run for a random while and
 * kill it; some ("early") kill it a random few hundred milliseconds after spawning, while it is
 * still starting up and its workers pick up what the previous life left behind. While the
 * service is down the checks read the database. Leases held by the dead process (webhook
 * deliveries 30 s, outbound dispatch 5 min) are then, with a seeded probability, moved into the
 * past, as if the process had stayed down that long: only the dead process held them, so this
 * is what waiting would do, and it lets the recovery paths run (and be killed) within the
 * trial's minutes. After the last kill the load stops, every lease is expired the same way, the
 * service starts once more and runs until its queues are drained, stops with SIGTERM, and the
 * final checks also demand that nothing is left queued, retrying or unanswered.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import postgres from "postgres"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"
import { type CrashGateway, startCrashGateway } from "./gateway.ts"
import { type CheckCounts, checkInvariants } from "./invariants.ts"
import { Gate, type LoadAccount, type LoadContext, type LoadRecords, type RunningLoad, setupAccounts, startLoad } from "./load.ts"
import { type CrashReceiver, startCrashReceiver } from "./receiver.ts"
import { type CrashRelay, startCrashRelay } from "./relay.ts"
import type { CrashOptions } from "./options.ts"
import { stream } from "./rng.ts"
import { freePort } from "../support/free-port.ts"
import { makeServiceProcess, type ServiceProcess } from "./service.ts"

export interface KillRecord {
  readonly trial: number
  readonly kind: "running" | "early"
  /** Milliseconds after ready (running) or after spawn (early). */
  readonly afterMs: number
  readonly leasesExpired: boolean
}

export interface CrashReport {
  readonly seed: number
  readonly database: string
  readonly kills: ReadonlyArray<KillRecord>
  readonly checks: number
  readonly durationMs: number
  readonly drainMs: number | null
  readonly finalExitCode: number | null
  readonly counts: CheckCounts | null
  /** Top-up requests that got no checkout link (cut by a kill, or refused). */
  readonly topupRequestsUnanswered: number
  readonly violations: ReadonlyArray<string>
  /** Which check found the violations (`after kill 7`, `final`). */
  readonly failedAt: string | null
  readonly serviceErrorLines: number
  /** The service's ERROR log lines (the last 100), for diagnosing a violation. */
  readonly errors: ReadonlyArray<string>
  readonly logTail: string
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const hex = (bytes: number) => crypto.randomBytes(bytes).toString("hex")

/** Moves the leases of the (dead) process into the past, as if it had stayed down past them. */
const expireLeases = async (sql: postgres.Sql) => {
  await sql.unsafe(
    `UPDATE webhook_deliveries SET locked_until = now() - interval '1 second'
      WHERE status IN ('pending', 'retrying') AND locked_until > now()`,
  )
  await sql.unsafe(`UPDATE outbound_messages SET locked_until = now() - interval '1 second' WHERE status = 'queued' AND locked_until > now()`)
}

const drained = async (sql: postgres.Sql, gateway: CrashGateway) => {
  if (gateway.outstanding() > 0) return false
  const [row] = await sql.unsafe(`
    SELECT (SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'retrying')) AS hooks,
           (SELECT count(*) FROM outbound_messages WHERE status = 'queued') AS queued`)
  return Number(row!.hooks) === 0 && Number(row!.queued) === 0
}

export const formatReport = (r: CrashReport): string => {
  const c = r.counts
  const early = r.kills.filter((k) => k.kind === "early").length
  const lines = [
    `crash trials: seed ${r.seed}, ${r.kills.length} kills (${r.kills.length - early} under load, ${early} during start-up), ` +
    `${r.checks} checks, ${(r.durationMs / 1000).toFixed(1)} s` + (r.drainMs !== null ? ` (final drain ${(r.drainMs / 1000).toFixed(1)} s)` : ""),
  ]
  if (c) {
    lines.push(
      `  inbound: ${c.inboundAcked} acknowledged 250 (${c.inboundAckedWithoutIds} without ids), ${c.inboundRefusedOrRejected} refused, ` +
        `${c.inboundUnknown} cut by a kill (${c.inboundUnknownStored} of them stored); ${c.inboundRows} rows, each charged once`,
      `  outbound: ${c.outboundCalls} send/batch calls (${c.outboundCallsAnswered} answered, ${c.outboundCallsBroken} cut or 5xx of which ${c.outboundCallsInternalError} were 500s), ` +
        `${c.outboundMessages} messages, ${c.recipientsCharged} recipients charged = ${c.recipientsSent} sent + ${c.recipientsRefunded} refunded ` +
        `(+${c.outboundQueued} messages queued); relay duplicates ${c.relayDuplicates}, refunded after reaching the relay ${c.refundedButRelayed}`,
      `  payments: ${c.topupsCreated} top-ups handed to the client (${r.topupRequestsUnanswered} requests cut), ` +
        `${c.topupsCompleted} completed, ${c.topupsFailed} failed; ` +
        `${c.paymentEventsPosted} gateway events, ${c.paymentEventsAcknowledged} acknowledged`,
      `  webhooks: ${c.deliveries} deliveries checked (${c.deliveriesDelivered} delivered, ${c.deliveriesFailed} failed after all attempts, ` +
        `${c.deliveriesInFlight} in flight), ${c.webhookRequests} requests received, ${c.deliveriesDuplicated} delivered more than once`,
    )
  }
  if (r.finalExitCode !== null) lines.push(`  final SIGTERM stop: exit code ${r.finalExitCode}`)
  lines.push(`  service ERROR log lines: ${r.serviceErrorLines}`)
  if (r.violations.length > 0) {
    lines.push(`  VIOLATIONS (${r.failedAt}; reproduce with CRASH_SEED=${r.seed}):`, ...r.violations.map((v) => `    ${v}`))
    lines.push("  service ERROR lines (last 30):", ...r.errors.slice(-30).map((l) => `    ${l.slice(0, 1500)}`))
    lines.push("  service log tail:", r.logTail.split("\n").map((l) => `    ${l.slice(0, 400)}`).join("\n"))
  }
  return lines.join("\n")
}

export const runCrashTrials = async (options: CrashOptions, log: (line: string) => void = () => undefined): Promise<CrashReport> => {
  const started = Date.now()
  const killRng = stream(options.seed, "kills")
  const loadRng = stream(options.seed, "load")
  const runId = hex(3)
  const database = `crash_${options.seed}_${runId}`
  const admin = postgres(options.adminUrl, { max: 1, onnotice: () => undefined })
  const dbUrl = new URL(options.adminUrl)
  dbUrl.pathname = `/${database}`
  await admin.unsafe(`CREATE DATABASE ${database}`)
  const sql = postgres(dbUrl.toString(), { max: 2, onnotice: () => undefined })
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crash-"))

  let relay: CrashRelay | undefined
  let gateway: CrashGateway | undefined
  let receiver: CrashReceiver | undefined
  let dns: TestDnsServer | undefined
  let service: ServiceProcess | undefined
  let load: RunningLoad | undefined
  let deliverLoop: Promise<void> | undefined
  let stopDeliveries = false
  const kills: Array<KillRecord> = []
  let checks = 0
  let counts: CheckCounts | null = null
  let violations: ReadonlyArray<string> = []
  let failedAt: string | null = null
  let drainMs: number | null = null
  let finalExitCode: number | null = null
  const gate = new Gate()
  const records: LoadRecords = { inbound: [], outbound: [], topups: [], topupRequestsUnanswered: 0 }

  try {
    relay = await startCrashRelay(stream(options.seed, "relay"), options.latencyMs)
    gateway = await startCrashGateway(stream(options.seed, "gateway"), options.latencyMs)
    receiver = await startCrashReceiver(stream(options.seed, "receiver"), options.receiverFailureRate, options.latencyMs)
    dns = await startDnsServer({})
    const ports = { http: await freePort(), smtp: await freePort(), sandbox: await freePort(), smtps: await freePort() }
    const platformDomain = "inbox.crash.test"
    service = makeServiceProcess(ports, {
      DATABASE_URL: dbUrl.toString(),
      DATA_DIR: dataDir,
      BASE_URL: `http://127.0.0.1:${ports.http}`,
      PLATFORM_DOMAIN: platformDomain,
      JWT_SECRET: hex(32),
      SECRETS_KEY: hex(32),
      SMTP_RELAY_URL: relay.url,
      PAYMENT_API_URL: gateway.url,
      PAYMENT_API_KEY: gateway.apiKey,
      PAYMENT_WEBHOOK_SECRET: gateway.secret,
      WEBHOOK_ALLOW_PRIVATE: "true",
      WEBHOOK_MAX_ATTEMPTS: String(options.webhookMaxAttempts),
      DNS_SERVERS: dns.address,
      LOG_LEVEL: "warn",
    })
    const ctx: LoadContext = {
      serviceUrl: service.url,
      mxPort: ports.smtp,
      platformDomain,
      runId,
      gate,
      relay,
      gateway,
      receiver,
      records,
    }
    let accounts: Array<LoadAccount> = []
    const gw = gateway
    deliverLoop = gw.deliverLoop(service.url, gate.wait, () => stopDeliveries)

    const check = async (label: string, final: boolean) => {
      const result = await checkInvariants({
        sql,
        accounts,
        records,
        relay: relay!,
        receiver: receiver!,
        gateway: gw,
        webhookMaxAttempts: options.webhookMaxAttempts,
        final,
      })
      checks++
      counts = result.counts
      if (result.violations.length > 0) {
        violations = result.violations
        failedAt = label
        return false
      }
      return true
    }

    for (let trial = 1; trial <= options.kills; trial++) {
      const early = trial > 1 && killRng.chance(options.earlyKillRate)
      const spawnedAt = Date.now()
      service.spawn()
      let afterMs: number
      let readyMs: number | null = null
      if (early) {
        afterMs = killRng.between(options.earlyMinMs, options.earlyMaxMs)
        await sleep(afterMs)
      } else {
        afterMs = killRng.between(options.minUpMs, options.maxUpMs)
        await service.ready()
        readyMs = Date.now() - spawnedAt
        gate.up()
        if (trial === 1) {
          accounts = await setupAccounts(ctx, options.accounts, 200_000)
          load = startLoad(ctx, accounts, loadRng, {
            inboundSessions: options.inboundSessions,
            inboundPauseMs: options.inboundPauseMs,
            outboundPauseMs: options.outboundPauseMs,
            topupPauseMs: options.topupPauseMs,
          })
        }
        await sleep(afterMs)
      }
      gate.down()
      if (!early && !service.running()) {
        // Nobody killed it: the service died on its own under the load.
        violations = [`[service-exited] the service exited by itself during trial ${trial}, before the kill`]
        failedAt = `trial ${trial}`
        break
      }
      await service.kill9()
      const leasesExpired = trial < options.kills && killRng.chance(options.expireLeasesRate)
      kills.push({ trial, kind: early ? "early" : "running", afterMs, leasesExpired })
      // Let the clients notice the cut connections before comparing what they were told.
      await sleep(100)
      const checkStart = Date.now()
      const passed = await check(`after kill ${trial}`, false)
      const checkMs = Date.now() - checkStart
      const c = counts as CheckCounts | null
      log(
        `kill ${trial}/${options.kills} ${early ? "during start-up" : "under load"} ${afterMs} ms after ${early ? "spawn" : "ready"}` +
          (c ? `: ${c.inboundAcked} acked, ${c.outboundMessages} sent msgs (${c.outboundQueued} queued), ${c.topupsCompleted} top-ups, ` +
            `${c.deliveries} deliveries (${c.deliveriesInFlight} in flight)` : "") +
          (leasesExpired ? "; leases expired" : "") + ` [${readyMs !== null ? `ready in ${readyMs} ms, ` : ""}check ${checkMs} ms]`,
      )
      if (!passed) break
      if (leasesExpired) await expireLeases(sql)
    }

    if (violations.length === 0) {
      await load?.stop()
      load = undefined
      await expireLeases(sql)
      service.spawn()
      await service.ready()
      gate.up()
      const drainStart = Date.now()
      while (!(await drained(sql, gw))) {
        if (Date.now() - drainStart > options.drainTimeoutMs) break
        await sleep(250)
      }
      stopDeliveries = true
      await deliverLoop
      drainMs = Date.now() - drainStart
      gate.down()
      finalExitCode = await service.stop()
      await check("final, after the drain", true)
    }
  } finally {
    stopDeliveries = true
    await load?.stop().catch(() => undefined)
    if (service?.running()) await service.kill9()
    gate.up() // releases a delivery loop still waiting for the service; it ends with `stopDeliveries`
    await Promise.race([deliverLoop, sleep(2000)])
    await relay?.close().catch(() => undefined)
    await gateway?.close().catch(() => undefined)
    await receiver?.close().catch(() => undefined)
    await dns?.close().catch(() => undefined)
    await sql.end({ timeout: 5 })
    if (!options.keepDatabase) await admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined)
    else log(`database kept: ${dbUrl.toString()}`)
    await admin.end({ timeout: 5 })
    fs.rmSync(dataDir, { recursive: true, force: true })
  }

  return {
    seed: options.seed,
    database,
    kills,
    checks,
    durationMs: Date.now() - started,
    drainMs,
    finalExitCode,
    counts,
    topupRequestsUnanswered: records.topupRequestsUnanswered,
    violations,
    failedAt,
    serviceErrorLines: service?.errorLines().length ?? 0,
    errors: service?.errorLines().slice(-100) ?? [],
    logTail: service?.logTail(60) ?? "",
  }
}
