/**
 * The payment gateway of the crash trials (PAYMENT_API_URL), on the DECISIONS.md wire contract:
 * `POST /checkout` answers a checkout link and the gateway's reference; payment outcomes go to
 * the service as signed events (`X-Gateway-Signature`, hex HMAC-SHA256 of the raw body with
 * PAYMENT_WEBHOOK_SECRET). Like a real gateway it keeps an outbox of events and re-posts each
 * until the service gives a definitive answer (2xx or 4xx): a kill mid-request only delays it.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Rng } from "./rng.ts"

export type PaymentEventName = "payment.completed" | "payment.failed"

export interface GatewayEvent {
  readonly id: string
  readonly event: PaymentEventName
  readonly provider_reference: string
  readonly amount_tzs: number
  readonly occurred_at: string
}

export interface EventDelivery {
  readonly event: GatewayEvent
  /** 0 until definitively answered. */
  status: number
  outcome: string | undefined
  posts: number
  /** Called once the service answered 2xx. */
  readonly onAcknowledged?: (d: EventDelivery) => void
}

export interface CrashGateway {
  readonly url: string
  readonly apiKey: string
  readonly secret: string
  /** Checkouts asked for: our reference → the gateway's reference and amount. */
  readonly checkouts: Map<string, { readonly providerReference: string; readonly amount: number }>
  readonly deliveries: Array<EventDelivery>
  /** Queues an event; the delivery loop posts it. */
  readonly emit: (event: GatewayEvent, onAcknowledged?: (d: EventDelivery) => void) => EventDelivery
  /** Events not yet definitively answered. */
  readonly outstanding: () => number
  /** Posts queued events in order until `stopped()`; waits on `up()` while the service is down. */
  readonly deliverLoop: (serviceUrl: string, up: () => Promise<void>, stopped: () => boolean) => Promise<void>
  readonly close: () => Promise<void>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** `latencyMs`: checkouts take up to this long (kills land between the top-up row and its reference). */
export const startCrashGateway = async (rng: Rng, latencyMs: number): Promise<CrashGateway> => {
  const apiKey = `gw_key_${crypto.randomBytes(8).toString("hex")}`
  const secret = crypto.randomBytes(32).toString("hex")
  const checkouts = new Map<string, { providerReference: string; amount: number }>()
  const deliveries: Array<EventDelivery> = []
  const outbox: Array<EventDelivery> = []
  let counter = 0

  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    // A kill of the service resets its connections mid-request.
    req.on("error", () => undefined)
    res.on("error", () => undefined)
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const reply = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" })
        res.end(JSON.stringify(body))
      }
      if (req.headers.authorization !== `Bearer ${apiKey}`) return reply(401, { error: "bad key" })
      let body: { amount?: number; reference?: string }
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        return reply(400, { error: "not json" })
      }
      if (req.method === "POST" && (req.url === "/checkout" || req.url === "/ussd-push") && body.reference && body.amount) {
        const providerReference = `gw_${++counter}_${crypto.randomBytes(4).toString("hex")}`
        checkouts.set(body.reference, { providerReference, amount: body.amount })
        return void setTimeout(() =>
          reply(200, {
            checkout_url: `http://gateway.test/pay/${providerReference}`,
            payment_link_url: `http://gateway.test/link/${providerReference}`,
            reference: providerReference,
          }), rng.int(latencyMs + 1))
      }
      reply(404, { error: "no such route" })
    })
  })
  server.on("clientError", (_e, socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port

  const post = async (serviceUrl: string, d: EventDelivery) => {
    const raw = JSON.stringify(d.event)
    const signature = crypto.createHmac("sha256", secret).update(raw).digest("hex")
    d.posts++
    const res = await fetch(`${serviceUrl}/api/billing/payments/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-gateway-signature": signature },
      body: raw,
      signal: AbortSignal.timeout(15_000),
    })
    const text = await res.text()
    return { status: res.status, text }
  }

  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    secret,
    checkouts,
    deliveries,
    emit: (event, onAcknowledged) => {
      const d: EventDelivery = { event, status: 0, outcome: undefined, posts: 0, ...(onAcknowledged ? { onAcknowledged } : {}) }
      deliveries.push(d)
      outbox.push(d)
      return d
    },
    outstanding: () => outbox.length,
    deliverLoop: async (serviceUrl, up, stopped) => {
      while (!stopped()) {
        const d = outbox[0]
        if (!d) {
          await sleep(50)
          continue
        }
        await up()
        let answer: { status: number; text: string } | undefined
        try {
          answer = await post(serviceUrl, d)
        } catch { /* connection refused or cut: the service is down, post again later */ }
        if (!answer || answer.status >= 500 || answer.status === 429) {
          await sleep(100)
          continue
        }
        outbox.shift()
        d.status = answer.status
        try {
          d.outcome = JSON.parse(answer.text)?.data?.outcome ?? JSON.parse(answer.text)?.errors?.[0]?.code
        } catch {
          d.outcome = undefined
        }
        if (answer.status < 300) d.onAcknowledged?.(d)
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
