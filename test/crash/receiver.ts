/**
 * The webhook receiver of the crash trials: answers 2xx most of the time and otherwise 500, 503
 * or a reset connection, drawn from a seeded stream, so deliveries retry while the service is
 * being killed. Every request is kept with the answer it got and whether its signature checked
 * out (hex HMAC-SHA256 of the raw body with the secret the webhook was created with).
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Rng } from "./rng.ts"

export interface HookRequest {
  /** `webhook-id`: the delivery id, stable across retries. */
  readonly deliveryId: string
  readonly body: string
  readonly payload: { readonly webhook_id?: number; readonly message_id?: number; readonly address_id?: number; readonly event?: string }
  readonly signatureValid: boolean
  /** The status answered, or 0 for a reset connection. */
  readonly answered: number
}

export interface CrashReceiver {
  readonly url: string
  readonly requests: Array<HookRequest>
  /** Tells the receiver the secret of a webhook (known once it is created). */
  readonly secretFor: (webhookId: number, secret: string) => void
  readonly close: () => Promise<void>
}

/** `latencyMs`: each answer waits up to this long (attempts are in flight when a kill lands). */
export const startCrashReceiver = async (rng: Rng, failureRate: number, latencyMs: number): Promise<CrashReceiver> => {
  const requests: Array<HookRequest> = []
  const secrets = new Map<number, string>()
  const sockets = new Set<import("node:net").Socket>()
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    // A kill of the service resets its connections mid-request.
    req.on("error", () => undefined)
    res.on("error", () => undefined)
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      let payload: HookRequest["payload"] = {}
      try {
        payload = JSON.parse(body)
      } catch { /* kept as {} and reported by the checks */ }
      const secret = secrets.get(Number(payload.webhook_id))
      const expected = secret ? crypto.createHmac("sha256", secret).update(body).digest("hex") : ""
      const given = String(req.headers["x-signature"] ?? "")
      const signatureValid = expected !== "" && given.length === expected.length &&
        crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected))
      const draw = rng.next()
      const answered = draw >= failureRate ? 200 : draw < failureRate * 0.5 ? 500 : draw < failureRate * 0.75 ? 503 : 0
      const delay = rng.int(latencyMs + 1)
      // Recorded when the answer is decided, before it is sent: a 2xx the service may never read still counts as received.
      requests.push({ deliveryId: String(req.headers["webhook-id"] ?? ""), body, payload, signatureValid, answered })
      setTimeout(() => {
        if (answered === 0) return void req.socket.destroy()
        res.writeHead(answered, { "content-type": "text/plain" })
        res.end(answered === 200 ? "ok" : "try later")
      }, delay)
    })
  })
  server.on("connection", (s) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  server.on("clientError", (_e, socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    secretFor: (id, secret) => void secrets.set(id, secret),
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
