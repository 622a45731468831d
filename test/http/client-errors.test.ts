/**
 * What Node's HTTP parser refuses before Hono runs (a request line or headers over its limit,
 * malformed HTTP) still answers the envelope, over a real socket (DECISIONS.md "Hostile input":
 * 414/431 with the envelope). Before, Node wrote a bare `431` status line with no body.
 */
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(() => api.stop())

/** Writes `request` on a fresh connection and reads until the server closes it. */
const rawExchange = (port: number, request: string) =>
  new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(request))
    let data = ""
    socket.setEncoding("latin1")
    socket.on("data", (chunk) => (data += chunk))
    socket.on("error", reject)
    socket.on("close", () => {
      const [head = "", body = ""] = data.split("\r\n\r\n", 2) as [string?, string?]
      const [statusLine = "", ...lines] = head.split("\r\n")
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]))
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body })
    })
  })

const expectEnvelope = (body: string, code: string, requestId?: string) => {
  const parsed = JSON.parse(body)
  expect(parsed.success).toBe(false)
  expect(parsed.errors).toEqual([expect.objectContaining({ code, message: expect.any(String) })])
  expect(parsed.request_id).toMatch(/^req_[0-9a-f]{24}$/)
  if (requestId !== undefined) expect(parsed.request_id).toBe(requestId)
  expect(parsed.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
}

describe("requests Node's parser refuses", () => {
  it("a 24 KB query string: 414 with the envelope (fetch, as a client sees it)", async () => {
    const res = await fetch(`${api.url}/api/billing/balance?q=${"a".repeat(24 * 1024)}`)
    expect(res.status).toBe(414)
    expect(res.headers.get("content-type")).toBe("application/json")
    const body = await res.text()
    expectEnvelope(body, "URI_TOO_LONG", res.headers.get("x-request-id")!)
  })

  it("24 KB of headers: 431 with the envelope", async () => {
    const res = await fetch(`${api.url}/healthz`, { headers: { "x-padding": "b".repeat(24 * 1024) } })
    expect(res.status).toBe(431)
    expectEnvelope(await res.text(), "HEADER_FIELDS_TOO_LARGE")
  })

  it("thousands of small headers: 431, raw socket, connection closed after the answer", async () => {
    const headers = Array.from({ length: 3000 }, (_, i) => `X-H${i}: v\r\n`).join("")
    const res = await rawExchange(api.httpPort, `GET /healthz HTTP/1.1\r\nHost: x\r\n${headers}\r\n`)
    expect(res.status).toBe(431)
    expect(res.headers.connection).toBe("close")
    expect(Number(res.headers["content-length"])).toBe(Buffer.byteLength(res.body))
    expectEnvelope(res.body, "HEADER_FIELDS_TOO_LARGE", res.headers["x-request-id"])
  })

  it("a request line that never ends within the limit: 414, raw socket", async () => {
    const res = await rawExchange(api.httpPort, `GET /api/inbound/messages?address_id=${"1".repeat(40 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`)
    expect(res.status).toBe(414)
    expectEnvelope(res.body, "URI_TOO_LONG")
  })

  it("malformed HTTP: 400 with the envelope", async () => {
    for (const junk of ["GARBAGE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET /\u0000 HTTP/1.1\r\nHost: x\r\n\r\n"]) {
      const res = await rawExchange(api.httpPort, junk)
      expect(res.status, JSON.stringify(junk)).toBe(400)
      expectEnvelope(res.body, "BAD_REQUEST")
    }
  })

  it("a body sent to a route that takes none: the answer closes the connection, so the next request is not lost", async () => {
    const body = "x".repeat(2_000_000)
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${api.url}/api/auth/email/resend`, { method: "POST", body })
      expect(res.status).toBe(401)
      expect(res.headers.get("connection")).toBe("close")
      expect((await res.json()).errors[0].code).toBe("UNAUTHORIZED")
      // Before, this request went out on the connection the server was dropping: "other side closed".
      expect((await fetch(`${api.url}/healthz`)).status).toBe(200)
    }
    // A route that reads its body keeps the connection.
    const read = await fetch(`${api.url}/api/auth/login`, { method: "POST", body: JSON.stringify({ identifier: "a@example.co.tz", password: "x" }) })
    expect(read.headers.get("connection")).not.toBe("close")
  })

  it("the server keeps answering normal requests afterwards", async () => {
    const res = await fetch(`${api.url}/healthz`)
    expect(res.status).toBe(200)
    expect((await res.json()).success).toBe(true)
  })
})
