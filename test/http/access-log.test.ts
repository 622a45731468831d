/**
 * Logs that never cost a request a write of its own: the buffered sink (order kept, whole lines
 * in chunks of at most PIPE_BUF bytes, flushed on demand and at exit, a stalled reader costs
 * dropped lines rather than memory), the access log through it at the configured level, and the
 * OpenAPI document built once and served unchanged.
 */
import type { Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openApiDocument } from "../../src/http/openapi.ts"
import { capabilityRoutes } from "../../src/http/routes/index.ts"
import { type LogSink, loggerLayer, makeFdSink, makeSink } from "../../src/logger.ts"
import { type Running, start } from "../../src/runtime.ts"
import { testSettings } from "../support/app.ts"
import { type TestDatabase, testDatabase } from "../support/db.ts"

const tmpFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sink-")), "log")

describe("makeFdSink", () => {
  it("keeps order, writes whole lines in chunks of at most 4096 bytes, and flushes on demand", async () => {
    const file = tmpFile()
    const fd = fs.openSync(file, "w")
    const sink = makeFdSink(fd, { maxDelayMs: 5 })
    const lines = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ i, pad: "x".repeat(i % 300), text: "ñ€" }))
    for (const l of lines) sink.write(l)
    await sink.flush()
    fs.closeSync(fd)
    expect(fs.readFileSync(file, "utf8")).toBe(lines.map((l) => l + "\n").join(""))
  })

  it("sends chunks that never split a line and stay within PIPE_BUF unless one line is longer", async () => {
    const chunks: Array<Buffer> = []
    const sink = makeSink({
      write: (chunk, done) => {
        chunks.push(Buffer.from(chunk))
        setImmediate(() => done(null, chunk.length))
      },
      writeSync: (chunk) => void chunks.push(Buffer.from(chunk)),
    }, { maxDelayMs: 1 })
    const long = "L".repeat(10_000)
    const lines = Array.from({ length: 300 }, (_, i) => (i === 150 ? long : `line ${i} ${"y".repeat(100)} ñ`))
    for (const l of lines) sink.write(l)
    await sink.flush()
    expect(chunks.length).toBeGreaterThan(5)
    for (const c of chunks) {
      expect(c.at(-1)).toBe(0x0a)
      if (c.length > 4096) expect(c.toString()).toBe(long + "\n")
    }
    expect(Buffer.concat(chunks).toString()).toBe(lines.map((l) => l + "\n").join(""))
  })

  it("writes a backlog in chunks of up to `chunkBytes` when it has the pipe to itself", async () => {
    const chunks: Array<Buffer> = []
    const sink = makeSink({
      write: (chunk, done) => {
        chunks.push(Buffer.from(chunk))
        setTimeout(() => done(null, chunk.length), 5)
      },
      writeSync: () => undefined,
    }, { maxDelayMs: 1, batchBytes: 1, chunkBytes: 1024 * 1024 })
    const lines = Array.from({ length: 3000 }, (_, i) => `line ${i} ${"y".repeat(100)}`)
    // The first line goes out alone; the rest pile up behind it and leave in one write.
    for (const l of lines) sink.write(l)
    await sink.flush()
    expect(chunks.map((c) => c.length)).toEqual([lines[0]!.length + 1, Buffer.byteLength(lines.slice(1).join("\n")) + 1])
    expect(Buffer.concat(chunks).toString()).toBe(lines.map((l) => l + "\n").join(""))
  })

  it("continues a partial write where it stopped", async () => {
    const out: Array<Buffer> = []
    const sink = makeSink({
      // A pipe near full takes a few bytes at a time.
      write: (chunk, done) => {
        const n = Math.min(7, chunk.length)
        out.push(Buffer.from(chunk.subarray(0, n)))
        setImmediate(() => done(null, n))
      },
      writeSync: () => undefined,
    }, { maxDelayMs: 1 })
    sink.write("alpha")
    sink.write("beta gamma delta")
    await sink.flush()
    expect(Buffer.concat(out).toString()).toBe("alpha\nbeta gamma delta\n")
  })

  it("drops lines past its bound while the reader stalls, and says how many", async () => {
    const file = tmpFile()
    const fd = fs.openSync(file, "w")
    const sink = makeFdSink(fd, { maxDelayMs: 1_000, batchBytes: 1 << 30, maxBufferedBytes: 1000 })
    for (let i = 0; i < 100; i++) sink.write(`line ${String(i).padStart(3, "0")} ${"z".repeat(40)}`)
    await sink.flush()
    fs.closeSync(fd)
    const out = fs.readFileSync(file, "utf8").trim().split("\n")
    expect(out.length).toBeLessThan(100)
    const notice = JSON.parse(out.at(-1)!)
    expect(notice).toMatchObject({ level: "WARN", annotations: { dropped: 100 - (out.length - 1) } })
  })

  it("writes what is queued at once on flushSync (process exit)", () => {
    const file = tmpFile()
    const fd = fs.openSync(file, "w")
    const sink = makeFdSink(fd, { maxDelayMs: 60_000 })
    sink.write("one")
    sink.write("two")
    sink.flushSync()
    fs.closeSync(fd)
    expect(fs.readFileSync(file, "utf8")).toBe("one\ntwo\n")
  })
})

/** A service whose logs go to an in-memory sink at `level`. */
const withLogs = async (level: "info" | "warn") => {
  const lines: Array<string> = []
  const sink: LogSink = { write: (l) => void lines.push(l), flush: async () => undefined, flushSync: () => undefined }
  const db = testDatabase()
  const running = await start(testSettings(), { database: db.layer, logger: loggerLayer(level, sink) as Layer.Layer<never>, workers: false }, { http: 0 })
  return { running, db, lines, url: `http://127.0.0.1:${running.httpPort}` }
}

describe("the access log", () => {
  let info: { running: Running; db: TestDatabase; lines: Array<string>; url: string }
  let warn: typeof info
  beforeAll(async () => {
    info = await withLogs("info")
    warn = await withLogs("warn")
  })
  afterAll(async () => {
    for (const s of [info, warn]) {
      await s?.running.stop()
      await s?.db.drop()
    }
  })

  it("writes one JSON line per request at level info, with the request id the client saw", async () => {
    info.lines.length = 0
    const res = await fetch(`${info.url}/healthz?x=1`, { headers: { "x-request-id": "trace-123" } })
    expect(res.status).toBe(200)
    const missing = await fetch(`${info.url}/api/billing/balance`)
    expect(missing.status).toBe(401)
    const access = info.lines.map((l) => JSON.parse(l)).filter((l) => l.message === "http")
    expect(access).toHaveLength(2)
    expect(access[0]).toMatchObject({
      level: "INFO",
      annotations: { request_id: "trace-123", method: "GET", path: "/healthz", status: 200 },
    })
    expect(typeof access[0].annotations.ms).toBe("number")
    expect(access[0].timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(access[1].annotations).toMatchObject({ request_id: missing.headers.get("x-request-id"), path: "/api/billing/balance", status: 401 })
  })

  it("writes none at level warn", async () => {
    warn.lines.length = 0
    expect((await fetch(`${warn.url}/healthz`)).status).toBe(200)
    expect(warn.lines.filter((l) => JSON.parse(l).message === "http")).toEqual([])
  })
})

describe("GET /api/openapi.json", () => {
  let s: Awaited<ReturnType<typeof withLogs>>
  beforeAll(async () => {
    s = await withLogs("warn")
  })
  afterAll(async () => {
    await s.running.stop()
    await s.db.drop()
  })

  it("serves the document generated from the routes, the same bytes every time", async () => {
    const first = await (await fetch(`${s.url}/api/openapi.json`)).text()
    const second = await (await fetch(`${s.url}/api/openapi.json`)).text()
    expect(second).toBe(first)
    expect(JSON.parse(first)).toEqual(openApiDocument(capabilityRoutes, testSettings().baseUrl))
    const docs = await fetch(`${s.url}/docs`)
    expect(docs.headers.get("content-type")).toMatch(/text\/html/)
    expect(await docs.text()).toBe(await (await fetch(`${s.url}/docs`)).text())
  })
})
