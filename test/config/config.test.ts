import { ConfigProvider, Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { DEFAULT_BLOB_BYTES, defaultIngestThreads, LOOP_PREPARE_BYTES, loadSettings, parseDuration, reusedOnLoopFor } from "../../src/config.ts"

const load = (env: Record<string, string>) =>
  Effect.runPromise(Effect.result(loadSettings(ConfigProvider.fromEnv({ env }))))

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "cfg-"))

describe("settings", () => {
  it("uses the embedded defaults of DECISIONS.md", async () => {
    const dir = tmp()
    const r = await load({ DATA_DIR: dir })
    expect(r._tag).toBe("Success")
    if (r._tag !== "Success") return
    const s = r.success
    expect(s).toMatchObject({
      port: 8080,
      smtpPort: 2525,
      sandboxSmtpHost: "localhost",
      sandboxSmtpPort: 2526,
      platformDomain: "inbox.localhost",
      mxHost: "mx.inbox.localhost",
      mailServerIp: "127.0.0.1",
      baseUrl: "http://localhost:8080",
      platformFrom: "noreply@inbox.localhost",
      webhookAllowPrivate: true,
      webhookMaxAttempts: 3,
      requirePhoneForOutbound: false,
      dnsServers: [],
    })
    expect(Duration.toMillis(s.domainRecheckInterval)).toBe(3_600_000)
    expect(s.jwtSecret).toHaveLength(32)
    expect(s.secretsKey).toHaveLength(32)
  })

  it("generates the keys once into DATA_DIR and reuses them", async () => {
    const dir = tmp()
    const a = await load({ DATA_DIR: dir })
    const b = await load({ DATA_DIR: dir })
    if (a._tag !== "Success" || b._tag !== "Success") throw new Error("load failed")
    expect(Buffer.from(a.success.jwtSecret).equals(Buffer.from(b.success.jwtSecret))).toBe(true)
    expect(Buffer.from(a.success.secretsKey).equals(Buffer.from(b.success.secretsKey))).toBe(true)
    expect(fs.statSync(path.join(dir, "secrets.json")).mode & 0o077).toBe(0)
  })

  it("takes keys and values from the environment", async () => {
    const key = "ab".repeat(32)
    const r = await load({
      DATA_DIR: tmp(),
      JWT_SECRET: key,
      SECRETS_KEY: key,
      PORT: "9000",
      PLATFORM_DOMAIN: "mail.example.co.tz",
      DNS_SERVERS: "127.0.0.1:5353, 10.0.0.2",
      DOMAIN_RECHECK_INTERVAL: "2s",
      WEBHOOK_ALLOW_PRIVATE: "false",
      DATABASE_URL: "postgres://u@h:5432/db",
    })
    if (r._tag !== "Success") throw new Error(r.failure.message)
    expect(r.success.port).toBe(9000)
    expect(r.success.mxHost).toBe("mx.mail.example.co.tz")
    expect(r.success.baseUrl).toBe("http://localhost:9000")
    expect(r.success.dnsServers).toEqual(["127.0.0.1:5353", "10.0.0.2"])
    expect(Duration.toMillis(r.success.domainRecheckInterval)).toBe(2000)
    expect(r.success.webhookAllowPrivate).toBe(false)
    expect(r.success.jwtSecret[0]).toBe(0xab)
  })

  it.each([
    ["PORT", "eighty", /PORT/],
    ["PORT", "70000", /PORT/],
    ["WEBHOOK_ALLOW_PRIVATE", "maybe", /WEBHOOK_ALLOW_PRIVATE/],
    ["DOMAIN_RECHECK_INTERVAL", "soon", /DOMAIN_RECHECK_INTERVAL/],
    ["JWT_SECRET", "short", /JWT_SECRET/],
    ["DATABASE_URL", "mysql://x", /DATABASE_URL/],
    ["WEBHOOK_MAX_ATTEMPTS", "0", /WEBHOOK_MAX_ATTEMPTS/],
    ["LOG_LEVEL", "loud", /LOG_LEVEL/],
    ["INGEST_THREADS", "-1", /INGEST_THREADS/],
    ["INGEST_THREADS", "65", /INGEST_THREADS/],
    ["INGEST_THREADS", "two", /INGEST_THREADS/],
    ["INGEST_BLOB_BYTES", "-1", /INGEST_BLOB_BYTES/],
    ["INGEST_BLOB_BYTES", "64k", /INGEST_BLOB_BYTES/],
  ])("refuses %s=%s with one line naming it", async (name, value, pattern) => {
    const r = await load({ DATA_DIR: tmp(), [name]: value })
    expect(r._tag).toBe("Failure")
    if (r._tag !== "Failure") return
    expect(r.failure.message).toMatch(pattern)
    expect(r.failure.message).not.toContain("\n")
  })

  it("prepares mail on cores-1 threads (at most 4, at least 1) on either engine unless INGEST_THREADS says otherwise, 0 meaning the event loop", async () => {
    expect([1, 2, 3, 4, 5, 8, 64].map((n) => defaultIngestThreads(n))).toEqual([1, 1, 2, 3, 4, 4, 4])
    const byDefault = await load({ DATA_DIR: tmp() })
    if (byDefault._tag !== "Success") throw new Error("load failed")
    expect(byDefault.success.ingestThreads).toBe(defaultIngestThreads(os.availableParallelism()))
    const onServer = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail" })
    if (onServer._tag !== "Success") throw new Error("load failed")
    expect(onServer.success.ingestThreads).toBe(defaultIngestThreads(os.availableParallelism()))
    const one = await load({ DATA_DIR: tmp(), INGEST_THREADS: "1" })
    if (one._tag !== "Success") throw new Error("load failed")
    expect(one.success.ingestThreads).toBe(1)
    const none = await load({ DATA_DIR: tmp(), INGEST_THREADS: "0" })
    if (none._tag !== "Success") throw new Error("load failed")
    expect(none.success.ingestThreads).toBe(0)
  })

  it("prepares in-memory mail of 64 KiB or more on the event loop, on either engine, unless INGEST_LOOP_BYTES says otherwise", async () => {
    const embedded = await load({ DATA_DIR: tmp() })
    const onServer = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail" })
    const set = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail", INGEST_LOOP_BYTES: "4096" })
    const all = await load({ DATA_DIR: tmp(), INGEST_LOOP_BYTES: "0" })
    expect(LOOP_PREPARE_BYTES).toBe(64 * 1024)
    expect([embedded, onServer, set, all].map((r) => (r._tag === "Success" ? r.success.ingestLoopBytes : r._tag))).toEqual([
      LOOP_PREPARE_BYTES,
      LOOP_PREPARE_BYTES,
      4096,
      0,
    ])
    const negative = await load({ DATA_DIR: tmp(), INGEST_LOOP_BYTES: "-1" })
    expect(negative._tag).toBe("Failure")
    if (negative._tag === "Failure") expect(negative.failure.message).toContain("INGEST_LOOP_BYTES")
  })

  it("runs the MX's protocol on the event loop unless MX_THREAD says otherwise, on either engine", async () => {
    const embedded = await load({ DATA_DIR: tmp() })
    const onServer = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail" })
    const onThread = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail", MX_THREAD: "true" })
    const onEmbedded = await load({ DATA_DIR: tmp(), MX_THREAD: "true" })
    expect([embedded, onServer, onThread, onEmbedded].map((r) => (r._tag === "Success" ? r.success.mxThread : r._tag))).toEqual([
      false,
      false,
      true,
      true,
    ])
    const junk = await load({ DATA_DIR: tmp(), MX_THREAD: "yes please" })
    expect(junk._tag).toBe("Failure")
    if (junk._tag === "Failure") expect(junk.failure.message).toContain("MX_THREAD")
  })

  it("prepares a reused connection's mail on the event loop by default with a PostgreSQL server only, unless INGEST_REUSED_ON_LOOP says otherwise", async () => {
    const embedded = await load({ DATA_DIR: tmp() })
    const onServer = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail" })
    const offOnServer = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail", INGEST_REUSED_ON_LOOP: "false" })
    const onEmbedded = await load({ DATA_DIR: tmp(), INGEST_REUSED_ON_LOOP: "true" })
    expect([embedded, onServer, offOnServer, onEmbedded].map((r) => (r._tag === "Success" ? r.success.ingestReusedOnLoop : r._tag))).toEqual([
      false,
      true,
      false,
      true,
    ])
    expect([reusedOnLoopFor("pglite"), reusedOnLoopFor("postgres")]).toEqual([false, true])
    const junk = await load({ DATA_DIR: tmp(), INGEST_REUSED_ON_LOOP: "sometimes" })
    expect(junk._tag).toBe("Failure")
    if (junk._tag === "Failure") expect(junk.failure.message).toContain("INGEST_REUSED_ON_LOOP")
  })

  it("keeps large bodies as files by default on PGlite only, unless INGEST_BLOB_BYTES says otherwise (0: off)", async () => {
    const embedded = await load({ DATA_DIR: tmp() })
    const onServer = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail" })
    const shared = await load({ DATA_DIR: tmp(), DATABASE_URL: "postgres://db.internal/mail", INGEST_BLOB_BYTES: "1048576" })
    const off = await load({ DATA_DIR: tmp(), INGEST_BLOB_BYTES: "0" })
    expect([embedded, onServer, shared, off].map((r) => (r._tag === "Success" ? r.success.ingestBlobBytes : r._tag))).toEqual([
      DEFAULT_BLOB_BYTES,
      0,
      1048576,
      0,
    ])
  })

  it("makes DATA_DIR's keys once when several processes start together on it (WEB_CONCURRENCY), and all read the same", { timeout: 60_000 }, async () => {
    const config = new URL("../../src/config.ts", import.meta.url).href
    // Each child loads its modules, says so, and blocks on stdin; once all have loaded each is sent
    // the same moment, 100 ms ahead, and spins until it: they reach the keys within a millisecond
    // or so of each other, as the workers of a cluster do. (Spinning only for those 100 ms: six
    // children spinning for the seconds loading takes on two cores starved the test beside this
    // one. With the create made last-writer-wins, this caught it in 6 runs of 6; released straight
    // from stdin without the spin, 2 of 6; the old 2.5 s spin, 5 of 6.)
    const script = `import { Effect, ConfigProvider } from "effect"; import { loadSettings } from ${JSON.stringify(config)};
      process.stdout.write("loaded\\n");
      const startAt = Number(await new Promise((go) => process.stdin.once("data", go)));
      process.stdin.destroy();
      while (Date.now() < startAt) {}
      const s = await Effect.runPromise(loadSettings(ConfigProvider.fromEnv()));
      process.stdout.write(Buffer.from(s.jwtSecret).toString("hex") + ":" + s.paymentWebhookSecret)`
    const child = (dataDir: string) => {
      const p = spawn(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, DATA_DIR: dataDir }, cwd: process.cwd() })
      let out = ""
      let err = ""
      let markLoaded!: () => void
      const loaded = new Promise<void>((resolve) => (markLoaded = resolve))
      p.stdout.on("data", (d) => {
        out += d
        if (out.startsWith("loaded\n")) markLoaded()
      })
      p.stderr.on("data", (d) => (err += d))
      const exited = new Promise<{ code: number | null; out: string; err: string }>((resolve) =>
        p.on("exit", (code) => (markLoaded(), resolve({ code, out: out.replace(/^loaded\n/, ""), err })))
      )
      return { loaded, go: (at: number) => p.stdin.end(`${at}\n`), exited }
    }
    for (let round = 0; round < 3; round++) {
      const dir = tmp()
      const children = Array.from({ length: 6 }, () => child(dir))
      await Promise.all(children.map((c) => c.loaded))
      const startAt = Date.now() + 100
      for (const c of children) c.go(startAt)
      const started = await Promise.all(children.map((c) => c.exited))
      for (const r of started) expect(r.code, r.err).toBe(0)
      expect(new Set(started.map((r) => r.out)).size).toBe(1)
      expect(started[0]!.out).toMatch(/^[0-9a-f]{32,}:.+$/)
      // Nothing of the losers' own copies is left behind.
      expect(fs.readdirSync(dir)).toEqual(["secrets.json"])
    }
  })

  it("parses durations", () => {
    expect(parseDuration("250ms").pipe((o) => o._tag)).toBe("Some")
    expect(parseDuration("5m")._tag).toBe("Some")
    expect(parseDuration("0s")._tag).toBe("None")
    expect(parseDuration("1 hour")._tag).toBe("None")
  })
})
