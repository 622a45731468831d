/**
 * The process around the service (src/process.ts): WEB_CONCURRENCY=N runs N workers sharing the
 * HTTP and SMTP ports on PostgreSQL, replaces a worker that dies, and stops them all on SIGTERM;
 * on PGlite it runs one process and says why. The entry re-executes itself lean (same pid).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { openPostgres } from "../../src/db/postgres.ts"
import { engineFlags } from "../../src/process.ts"
import { onPostgres, testDatabaseUrl } from "../support/db.ts"
import { freePort } from "../support/free-port.ts"
import { processSnapshot } from "../support/process-snapshot.ts"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const children = (pid: number): Array<number> => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}
/** utime + stime in clock ticks. */
const cpuTicks = (pid: number): number => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return Number(fields[11]) + Number(fields[12])
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

interface Service {
  readonly child: ChildProcess
  readonly http: number
  readonly smtp: number
  readonly output: () => string
  readonly exited: Promise<number | null>
}

let running: Service | undefined
afterEach(async () => {
  const pid = running?.child.pid
  if (pid && alive(pid)) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch { /* gone */ }
  }
  running = undefined
})

const startService = async (env: Record<string, string>): Promise<Service> => {
  const [http, smtp, sandbox, smtps] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "cluster-"))
  let output = ""
  const child = spawn(process.execPath, ["src/main.ts"], {
    env: {
      ...process.env,
      PORT: String(http),
      SMTP_PORT: String(smtp),
      SANDBOX_SMTP_PORT: String(sandbox),
      SANDBOX_SMTPS_PORT: String(smtps),
      DATA_DIR: dataDir,
      LOG_LEVEL: "info",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  })
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  running = { child, http, smtp, output: () => output, exited }
  return running
}

const waitUntil = async (ok: () => Promise<boolean> | boolean, ms: number, what: string) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await ok()) return
    await sleep(100)
  }
  // Where the service stood: its threads, and what it printed.
  throw new Error(`timed out waiting for ${what}${processSnapshot(running?.child.pid)}\noutput: ${running?.output().slice(-16_384) ?? ""}`)
}

const ready = (s: Service) => fetch(`http://127.0.0.1:${s.http}/readyz`).then((r) => r.ok, () => false)

/** The SMTP greeting on a fresh connection. */
const greeting = (port: number) =>
  new Promise<string>((resolve, reject) => {
    const socket = net.connect({ port, host: "127.0.0.1" })
    socket.setTimeout(10_000, () => reject(new Error("no SMTP greeting within 10 s")))
    socket.once("data", (d) => {
      resolve(String(d))
      socket.end("QUIT\r\n")
    })
    socket.once("error", reject)
  })

const logLines = (s: Service) =>
  s.output().trim().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { message: string; level: string; annotations: Record<string, any> })

describe("src/main.ts as a process", () => {
  it("re-executes itself lean under the same pid", { timeout: 90_000 }, async () => {
    const s = await startService({})
    await waitUntil(() => ready(s), 60_000, "readyz")
    const cmdline = fs.readFileSync(`/proc/${s.child.pid}/cmdline`, "utf8").split("\0")
    // The young generation follows the engine: small on PGlite (idle RSS), larger on a server.
    expect(cmdline).toContain(process.env.DATABASE_URL ? "--max-semi-space-size=32" : "--max-semi-space-size=4")
    // PGlite's WebAssembly is never tiered up (its optimising compile peaked at ~800 MiB), and
    // gathers no feedback for an inlining that never comes.
    if (process.env.DATABASE_URL) expect(cmdline).not.toContain("--no-wasm-tier-up")
    else expect(cmdline).toEqual(expect.arrayContaining(["--no-wasm-tier-up", "--no-wasm-dynamic-tiering", "--no-wasm-inlining"]))
    // glibc's malloc keeps large buffers for reuse instead of mapping and unmapping each (mallocTuning).
    expect(fs.readFileSync(`/proc/${s.child.pid}/environ`, "utf8").split("\0")).toEqual(
      expect.arrayContaining(["MALLOC_ARENA_MAX=2", `MALLOC_MMAP_THRESHOLD_=${4 * 1024 * 1024}`, `MALLOC_TRIM_THRESHOLD_=${256 * 1024 * 1024}`]),
    )
    s.child.kill("SIGTERM")
    expect(await s.exited).toBe(0)
  })

  it("refuses an unusable WEB_CONCURRENCY with one line", async () => {
    const s = await startService({ WEB_CONCURRENCY: "many" })
    expect(await s.exited).toBe(1)
    expect(s.output().trim()).toBe("Invalid setting WEB_CONCURRENCY: expected an integer from 1 to 64")
  })

  it.skipIf(onPostgres)("runs one process on PGlite and says why", { timeout: 90_000 }, async () => {
    const s = await startService({ WEB_CONCURRENCY: "2", DATABASE_URL: "" })
    await waitUntil(() => ready(s), 60_000, "readyz")
    expect(logLines(s).some((l) => l.level === "WARN" && /WEB_CONCURRENCY ignored/.test(l.message))).toBe(true)
    expect(children(s.child.pid!)).toEqual([])
    s.child.kill("SIGTERM")
    expect(await s.exited).toBe(0)
  })
})

describe.skipIf(!onPostgres)("WEB_CONCURRENCY=2 on PostgreSQL", () => {
  // With MX_THREAD each worker's MX listens from its thread, outside node:cluster's shared
  // handle: the threads bind the port together (SO_REUSEPORT, src/smtp/mx-thread-protocol.ts).
  it.each([["false"], ["true"]])("serves HTTP and SMTP from two workers on the same ports, replaces a dead one, stops on SIGTERM (MX_THREAD=%s)", { timeout: 120_000 }, async (mxThread) => {
    const schema = `t_${randomHexSync(6)}`
    const admin = openPostgres({ url: testDatabaseUrl!, max: 1 })
    await admin.source.query(`CREATE SCHEMA ${schema}`)
    try {
      const url = new URL(testDatabaseUrl!)
      url.searchParams.set("search_path", schema)
      const s = await startService({ WEB_CONCURRENCY: "2", DATABASE_URL: url.toString(), MX_THREAD: mxThread })
      await waitUntil(() => logLines(s).some((l) => l.message === "all workers listening"), 90_000, "both workers")
      const workers = children(s.child.pid!)
      expect(workers).toHaveLength(2)
      // Every worker runs with the server's V8 flags (the young generation's size).
      for (const pid of workers) expect(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")).toEqual(expect.arrayContaining(engineFlags(testDatabaseUrl)))
      // Each worker's own line (their logs are buffered for a few ms).
      await waitUntil(() => logLines(s).filter((l) => l.message === "listening").length === 2, 10_000, "both listening lines")
      const listening = logLines(s).filter((l) => l.message === "listening")
      for (const l of listening) expect(l.annotations).toMatchObject({ http: s.http, mx: s.smtp })

      // Requests on fresh connections are spread over both workers.
      const before = workers.map(cpuTicks)
      const answers = await Promise.all(Array.from({ length: 200 }, () =>
        fetch(`http://127.0.0.1:${s.http}/readyz`, { headers: { connection: "close" }, signal: AbortSignal.timeout(20_000) }).then((r) => r.status)
      ))
      expect(answers.every((st) => st === 200)).toBe(true)
      const after = workers.map(cpuTicks)
      for (let i = 0; i < 2; i++) expect(after[i]!, `worker ${workers[i]} took no request`).toBeGreaterThan(before[i]!)
      for (let i = 0; i < 4; i++) expect(await greeting(s.smtp)).toMatch(/^220 /)

      // One worker dies: the other keeps serving the same ports and a new one takes its place.
      process.kill(workers[0]!, "SIGKILL")
      await waitUntil(() => logLines(s).some((l) => l.message === "a worker died; starting another"), 30_000, "the primary to notice")
      // The replacement starts a second later and needs a few to listen: this is the survivor.
      expect((await fetch(`http://127.0.0.1:${s.http}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200)
      expect(await greeting(s.smtp)).toMatch(/^220 /)
      await waitUntil(() => children(s.child.pid!).length === 2 && !children(s.child.pid!).includes(workers[0]!), 60_000, "a new worker")
      await waitUntil(() => logLines(s).filter((l) => l.message === "listening").length === 3, 60_000, "the new worker listening")
      expect((await fetch(`http://127.0.0.1:${s.http}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200)

      const all = children(s.child.pid!)
      s.child.kill("SIGTERM")
      expect(await s.exited).toBe(0)
      for (const pid of all) expect(alive(pid)).toBe(false)
      expect(logLines(s).filter((l) => l.message === "shutting down").length).toBe(3)
    } finally {
      await admin.source.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined)
      await admin.close()
    }
  })
})
