/**
 * A real webhook receiver for tests: a node:http server on 127.0.0.1:0 that records every
 * request and answers as told (per request, in order; the last behaviour repeats). It verifies
 * signatures the way a customer's receiver would, with node:crypto and a constant-time compare,
 * independently of the service's own signing code.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export type Behaviour =
  | { readonly kind: "status"; readonly status: number; readonly body?: string; readonly headers?: Record<string, string> }
  /** Accepts the request and never answers. */
  | { readonly kind: "hang" }
  /** Destroys the socket without an answer (ECONNRESET at the client). */
  | { readonly kind: "reset" }
  /** Sends the status at once, then a body of `bytes` in slow chunks. */
  | { readonly kind: "slow-huge"; readonly status: number; readonly bytes: number; readonly chunk?: number; readonly everyMs?: number }

export const answer = (status: number, body = "", headers: Record<string, string> = {}): Behaviour => ({ kind: "status", status, body, headers })

export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  readonly at: number
}

export interface WebhookReceiver {
  readonly url: string
  readonly port: number
  readonly requests: Array<Received>
  /** Sets how the next requests are answered (the last entry repeats). */
  readonly behave: (...behaviours: Array<Behaviour>) => void
  /** Resolves once `n` requests arrived (rejects after `timeoutMs`). */
  readonly waitFor: (n: number, timeoutMs?: number) => Promise<Array<Received>>
  readonly close: () => Promise<void>
}

export const startReceiver = async (...initial: Array<Behaviour>): Promise<WebhookReceiver> => {
  const requests: Array<Received> = []
  let queue: Array<Behaviour> = initial.length ? initial : [answer(200, "ok")]
  const waiters: Array<() => void> = []
  const sockets = new Set<import("node:net").Socket>()
  const timers = new Set<NodeJS.Timeout>()

  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      requests.push({
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      })
      for (const w of waiters.splice(0)) w()
      const b = queue.length > 1 ? queue.shift()! : queue[0]!
      switch (b.kind) {
        case "status":
          res.writeHead(b.status, { "content-type": "text/plain", ...(b.headers ?? {}) })
          res.end(b.body ?? "")
          return
        case "hang":
          return
        case "reset":
          req.socket.destroy()
          return
        case "slow-huge": {
          res.writeHead(b.status, { "content-type": "text/plain" })
          res.flushHeaders()
          let sent = 0
          const chunk = Buffer.alloc(b.chunk ?? 512, "x")
          const timer = setInterval(() => {
            if (res.destroyed || sent >= b.bytes) {
              clearInterval(timer)
              timers.delete(timer)
              if (!res.destroyed) res.end()
              return
            }
            res.write(chunk)
            sent += chunk.length
          }, b.everyMs ?? 50)
          timers.add(timer)
          return
        }
      }
    })
  })
  server.on("connection", (s) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port

  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    requests,
    behave: (...behaviours) => {
      queue = behaviours
    },
    waitFor: (n, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const deadline = Date.now() + timeoutMs
        const check = () => {
          if (requests.length >= n) return resolve(requests.slice(0, n))
          if (Date.now() > deadline) return reject(new Error(`receiver got ${requests.length} of ${n} requests`))
          waiters.push(check)
          setTimeout(check, Math.max(0, Math.min(200, deadline - Date.now())))
        }
        check()
      }),
    close: async () => {
      for (const t of timers) clearInterval(t)
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const safeEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && crypto.timingSafeEqual(x, y)
}

const header = (r: Received, name: string): string => {
  const v = r.headers[name]
  return Array.isArray(v) ? v.join(",") : v ?? ""
}

/** What a receiver checks: both signature forms, with the secret as shown at creation. */
export const verifySignatures = (r: Received, secret: string) => {
  const hex = crypto.createHmac("sha256", secret).update(r.body).digest("hex")
  const id = header(r, "webhook-id")
  const ts = header(r, "webhook-timestamp")
  const standard = crypto.createHmac("sha256", secret).update(`${id}.${ts}.${r.body}`).digest("base64")
  return {
    xSignature: safeEqual(header(r, "x-signature"), hex),
    xWebhookSignature: safeEqual(header(r, "x-webhook-signature"), hex),
    // `webhook-signature` may list several space-separated `v1,<sig>` entries.
    standard: header(r, "webhook-signature").split(" ").some((s) => safeEqual(s, `v1,${standard}`)),
  }
}
