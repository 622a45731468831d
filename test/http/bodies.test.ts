/**
 * A slow or huge request body holds up nobody else: bodies are read off the socket
 * asynchronously, once the caller is authenticated and before the route's handler runs or the
 * database is touched, and parsing the largest body allowed (MAX_BODY_BYTES) is a short pause,
 * not a stall. A caller without credentials has no body read at all, and a body without
 * Content-Length is given up the moment it passes the limit.
 */
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
let account: TestAccount
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
  account = await createAccount(api)
})
afterAll(() => api.stop())

/**
 * Authenticated reads (key lookup, database) back to back while `during` runs. For each read: its
 * latency, and the CPU time this thread (which runs the server) spent while it was in flight.
 */
const probe = async (during: Promise<unknown>) => {
  const latencies: Array<number> = []
  const cpu: Array<number> = []
  let done = false
  void during.finally(() => (done = true))
  while (!done) {
    const t = performance.now()
    const before = process.threadCpuUsage()
    const r = await fetch(`${api.url}/api/billing/balance`, { headers: { "x-api-key": account.apiKey } })
    expect(r.status).toBe(200)
    await r.arrayBuffer()
    latencies.push(performance.now() - t)
    const used = process.threadCpuUsage(before)
    cpu.push((used.user + used.system) / 1000)
  }
  await during
  return { latencies: latencies.sort((a, b) => a - b), cpu: cpu.sort((a, b) => a - b) }
}

/** POSTs `body` a few bytes at a time, `ms` apart; resolves with the status. */
const trickle = (path: string, body: string, bytesPerTick: number, ms: number) =>
  new Promise<number>((resolve, reject) => {
    const url = new URL(api.url)
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: "POST",
      path,
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) },
    }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode!))
    })
    req.on("error", reject)
    let at = 0
    const tick = setInterval(() => {
      req.write(body.slice(at, at + bytesPerTick))
      at += bytesPerTick
      if (at >= body.length) {
        clearInterval(tick)
        req.end()
      }
    }, ms)
  })

/**
 * Writes a request's head and the start of its body on a raw socket and leaves the rest unsent;
 * resolves with the status line of whatever answer comes back within `ms` (undefined if none).
 */
const unfinished = (head: string, start: string, ms = 3000) =>
  new Promise<string | undefined>((resolve) => {
    const url = new URL(api.url)
    const socket = net.connect(Number(url.port), url.hostname, () => socket.write(head + "\r\n" + start))
    let answer = ""
    const done = (status: string | undefined) => (clearTimeout(timer), socket.destroy(), resolve(status))
    const timer = setTimeout(() => done(undefined), ms)
    socket.on("data", (d) => {
      answer += d.toString("latin1")
      if (answer.includes("\r\n")) done(answer.slice(0, answer.indexOf("\r\n")))
    })
    socket.on("error", () => done(undefined))
  })

/** POSTs `chunks` with Transfer-Encoding: chunked (no Content-Length); resolves with status and body. */
const chunked = (path: string, headers: Record<string, string>, chunks: ReadonlyArray<string>) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const url = new URL(api.url)
    const req = http.request({ host: url.hostname, port: url.port, method: "POST", path, headers: { ...headers, "transfer-encoding": "chunked" } }, (res) => {
      let body = ""
      res.on("data", (d) => (body += d))
      res.on("end", () => resolve({ status: res.statusCode!, body }))
    })
    req.on("error", reject)
    for (const c of chunks) req.write(c)
    req.end()
  })

describe("request bodies", () => {
  it("a caller without credentials is answered 401 before its body is read", async () => {
    const head = (more: string) =>
      `POST /api/apikeys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${more}Authorization: Bearer not-a-token\r\n`
    // 10 MB announced, 9 bytes sent: an answer can only come without the body.
    expect(await unfinished(head("Content-Length: 10000000\r\n"), `{"name":"`)).toMatch(/^HTTP\/1\.1 401/)
    expect(await unfinished(head("Transfer-Encoding: chunked\r\n"), `9\r\n{"name":"\r\n`)).toMatch(/^HTTP\/1\.1 401/)
    // With credentials the same unfinished body is waited for.
    expect(await unfinished(head("Content-Length: 10000000\r\n").replace("not-a-token", account.token), `{"name":"`, 500)).toBeUndefined()
  })

  it("a body without Content-Length is read to the limit: within it taken, past it 413", async () => {
    const auth = { authorization: `Bearer ${account.token}`, "content-type": "application/json" }
    const fits = await chunked("/api/apikeys", auth, [`{"name":"chun`, `ked"}`])
    expect(fits.status, fits.body).toBe(201)
    expect(JSON.parse(fits.body).data.api_key.name).toBe("chunked")
    const piece = "a".repeat(1024 * 1024)
    const over = await chunked("/api/apikeys", auth, [`{"name":"x","label":"`, ...Array.from({ length: Math.ceil(api.settings.maxBodyBytes / piece.length) }, () => piece), `"}`])
    expect(over.status).toBe(413)
    expect(JSON.parse(over.body).errors[0].code).toBe("PAYLOAD_TOO_LARGE")
  })

  it("a body trickling in over two seconds does not slow other requests", async () => {
    const body = JSON.stringify({ identifier: "nobody@example.co.tz", password: "not the password" })
    const { latencies } = await probe(trickle("/api/auth/login", body, Math.ceil(body.length / 20), 100))
    expect(latencies.length).toBeGreaterThan(20)
    // Loose bounds for a shared, loaded machine: a blocked loop would show the full 2 s.
    expect(latencies[Math.floor(latencies.length / 2)]!).toBeLessThan(100)
    expect(latencies.at(-1)!).toBeLessThan(1000)
  })

  it("the largest body allowed is a short pause for others, and one byte more is refused before it is read", async () => {
    const huge = JSON.stringify({ name: "x", label: "a".repeat(api.settings.maxBodyBytes - 100) })
    const send = fetch(`${api.url}/api/apikeys`, {
      method: "POST",
      headers: { authorization: `Bearer ${account.token}`, "content-type": "application/json" },
      body: huge,
    }).then(async (r) => ({ status: r.status, body: await r.json() }))
    const { cpu } = await probe(send)
    expect((await send).status).toBe(201)
    // The pause is CPU work (parsing and checking the body: 100-300 ms here when idle), so it is
    // measured in this thread's CPU time, which a loaded CI machine does not stretch the way it
    // stretches wall time (one run's probe waited 1.46 s behind the parallel suite). A stall, such
    // as a check quadratic in the body's length, still shows in full.
    expect(cpu.at(-1)!).toBeLessThan(1000)
    const tooBig = await fetch(`${api.url}/api/apikeys`, {
      method: "POST",
      headers: { authorization: `Bearer ${account.token}`, "content-type": "application/json", "content-length": String(api.settings.maxBodyBytes + 1) },
      body: "x".repeat(api.settings.maxBodyBytes + 1),
    })
    expect(tooBig.status).toBe(413)
    expect((await tooBig.json()).errors[0].code).toBe("PAYLOAD_TOO_LARGE")
  })
})

describe("bodies held at once", () => {
  // MAX_BODY_BYTES of 2,000: the process holds at most BODY_BUDGET_BODIES × 2,000 bytes of bodies.
  const MAX = 2000
  let small: TestApp
  let key: string
  beforeAll(async () => {
    small = await makeTestApp({ workers: false, settings: { maxBodyBytes: MAX } })
    key = (await createAccount(small)).token
  })
  afterAll(() => small.stop())

  /** A POST whose head and first bytes are sent now, the rest when `finish` is called (or never). */
  const held = (length: number) => {
    const url = new URL(small.url)
    const socket = net.connect(Number(url.port), url.hostname)
    const status = new Promise<string | undefined>((resolve) => {
      let answer = ""
      socket.on("data", (d) => {
        answer += d.toString("latin1")
        if (answer.includes("\r\n")) resolve(answer.slice(0, answer.indexOf("\r\n")))
      })
      socket.on("close", () => resolve(undefined))
      socket.on("error", () => resolve(undefined))
    })
    const body = JSON.stringify({ name: "k", label: "a".repeat(length - 26) })
    socket.write(
      `POST /api/apikeys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, 10)}`,
    )
    return { status, finish: () => socket.write(body.slice(10)), drop: () => socket.destroy() }
  }
  /** A whole, small body creating an API key; resolves with the status. */
  const createKey = (name: string) =>
    fetch(`${small.url}/api/apikeys`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name }),
    }).then((r) => r.status)
  const answered = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => true), new Promise((r) => setTimeout(() => r(false), ms))])

  it("a body finding no room waits unread until one before it is answered or dropped", async () => {
    const { BODY_BUDGET_BODIES } = await import("../../src/http/body.ts")
    const holders = Array.from({ length: BODY_BUDGET_BODIES }, () => held(MAX))
    await new Promise((r) => setTimeout(r, 200))
    // The budget is taken: a whole small body sent now is not read, so not answered.
    const next = createKey("waits")
    expect(await answered(next, 500)).toBe(false)
    // Requests without a body never wait.
    expect((await fetch(`${small.url}/api/billing/balance`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
    // One holder finishes its body and is answered: there is room again.
    holders[0]!.finish()
    expect(await holders[0]!.status).toMatch(/^HTTP\/1\.1 201/)
    expect(await next).toBe(201)
    // Full again; a client that goes away gives its room back too.
    const more = held(MAX)
    await new Promise((r) => setTimeout(r, 200))
    const again = createKey("after-drop")
    expect(await answered(again, 500)).toBe(false)
    holders[1]!.drop()
    expect(await again).toBe(201)
    for (const h of holders.slice(2)) h.finish()
    more.finish()
    for (const h of holders.slice(2)) expect(await h.status).toMatch(/^HTTP\/1\.1 201/)
    expect(await more.status).toMatch(/^HTTP\/1\.1 201/)
  })
})
