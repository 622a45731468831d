/**
 * A slow or huge request body holds up nobody else: bodies are read off the socket
 * asynchronously, before any handler runs or the database is touched, and parsing the largest
 * body allowed (MAX_BODY_BYTES) is a short pause, not a stall.
 */
import * as http from "node:http"
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

/** Authenticated reads (key lookup, database) back to back while `during` runs; their latencies. */
const probe = async (during: Promise<unknown>) => {
  const latencies: Array<number> = []
  let done = false
  void during.finally(() => (done = true))
  while (!done) {
    const t = performance.now()
    const r = await fetch(`${api.url}/api/billing/balance`, { headers: { "x-api-key": account.apiKey } })
    expect(r.status).toBe(200)
    await r.arrayBuffer()
    latencies.push(performance.now() - t)
  }
  await during
  return latencies.sort((a, b) => a - b)
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

describe("request bodies", () => {
  it("a body trickling in over two seconds does not slow other requests", async () => {
    const body = JSON.stringify({ identifier: "nobody@example.co.tz", password: "not the password" })
    const latencies = await probe(trickle("/api/auth/login", body, Math.ceil(body.length / 20), 100))
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
    const latencies = await probe(send)
    expect((await send).status).toBe(201)
    expect(latencies.at(-1)!).toBeLessThan(1000)
    const tooBig = await fetch(`${api.url}/api/apikeys`, {
      method: "POST",
      headers: { authorization: `Bearer ${account.token}`, "content-type": "application/json", "content-length": String(api.settings.maxBodyBytes + 1) },
      body: "x".repeat(api.settings.maxBodyBytes + 1),
    })
    expect(tooBig.status).toBe(413)
    expect((await tooBig.json()).errors[0].code).toBe("PAYLOAD_TOO_LARGE")
  })
})
