/**
 * Every provider call has one deadline covering lookup, connect, request and the whole answer,
 * and reads at most 1 MiB (DECISIONS.md "Hostile input"), checked per adapter against hostile
 * servers on real sockets: SMS, payment gateway, AI gateway, webhook receivers (a slow DNS
 * answer through the loopback DNS server) and the SMTP relay (replies trickled a byte at a time,
 * which resets every idle timer nodemailer has).
 */
import { Duration, Effect, Exit, Layer, Option } from "effect"
import * as net from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../effects/config.ts"
import { AiGateway } from "../../effects/ports/AiGateway.ts"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { OutboundMailer } from "../../effects/ports/OutboundMailer.ts"
import { PlatformMailer } from "../../effects/ports/PlatformMailer.ts"
import { SmsGateway } from "../../effects/ports/SmsGateway.ts"
import { WebhookTransport } from "../../effects/webhooks/transport.ts"
import { openAiGateway } from "../../src/providers/ai-openai.ts"
import { relayOutboundMailer } from "../../src/providers/outbound-relay.ts"
import { relayPlatformMailer } from "../../src/providers/platform-mailer.ts"
import { httpSmsGateway } from "../../src/providers/sms.ts"
import { webhookHttpLayer } from "../../src/providers/webhook-http.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, testSettings } from "../support/app.ts"
import { startDnsServer } from "../support/dns-server.ts"
import { type HostileServer, type Misbehaviour, startHostileServer } from "../support/hostile-http.ts"

const cleanups: Array<() => Promise<unknown>> = []
afterAll(() => Promise.all(cleanups.map((c) => c())))
const serve = async (b: Misbehaviour): Promise<HostileServer> => {
  const s = await startHostileServer(b)
  cleanups.push(s.close)
  return s
}

const settings = (overrides: Parameters<typeof testSettings>[0] = {}) =>
  Layer.succeed(AppConfig, AppConfig.of(testSettings({ smsApiKey: Option.some("platform-key"), ...overrides })))

const timedExit = async <A, E>(effect: Effect.Effect<A, E, never>) => {
  const started = performance.now()
  const exit = await Effect.runPromiseExit(effect)
  return { exit, ms: performance.now() - started }
}

describe("SMS provider", () => {
  const sms = (url: string) => httpSmsGateway(url, "600 millis").pipe(Layer.provide(Layer.mergeAll(settings(), HttpClient.layer)))
  const send = (url: string) => Effect.provide(SmsGateway.use((g) => g.send({ to: "+255712345678", message: "Code 123456" })), sms(url))

  it("a 2xx whose body drips forever is answered at the deadline, as sent", async () => {
    const s = await serve({ kind: "drip", everyMs: 20 })
    const { exit, ms } = await timedExit(send(s.url))
    expect(ms).toBeLessThan(2_500)
    expect(Exit.isSuccess(exit) && exit.value).toEqual({ messageId: null })
  })

  it("an endless 2xx body is cut at 1 MiB: sent, no id", async () => {
    const s = await serve({ kind: "endless" })
    const { exit, ms } = await timedExit(send(s.url))
    expect(ms).toBeLessThan(2_500)
    expect(Exit.isSuccess(exit) && exit.value).toEqual({ messageId: null })
  })

  it("silence fails at the deadline with a provider error", async () => {
    const s = await serve({ kind: "silent" })
    const { exit, ms } = await timedExit(send(s.url))
    expect(ms).toBeLessThan(2_500)
    expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("no answer within")
  })
})

describe("payment gateway", () => {
  it("a reply over 1 MiB is not read: the top-up fails with 502", async () => {
    const pad = "x".repeat(2 * 1024 * 1024)
    const s = await serve({ kind: "json", body: JSON.stringify({ checkout_url: "https://pay.example/c/1", reference: "ref-1", pad }) })
    const api = await makeTestApp({ workers: false, settings: { paymentApiUrl: Option.some(s.url), paymentApiKey: Option.some("k") } })
    cleanups.push(api.stop)
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 5000 } })
    expect(res.status, JSON.stringify(res.body)).toBe(502)
    expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
  })

  it("the same reply under 1 MiB still works", async () => {
    const s = await serve({ kind: "json", body: JSON.stringify({ checkout_url: "https://pay.example/c/2", reference: "ref-2", pad: "x".repeat(1000) }) })
    const api = await makeTestApp({ workers: false, settings: { paymentApiUrl: Option.some(s.url), paymentApiKey: Option.some("k") } })
    cleanups.push(api.stop)
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 5000 } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(res.body.data.checkout_url).toBe("https://pay.example/c/2")
  })
})

describe("AI gateway", () => {
  const completion = (content: string) =>
    JSON.stringify({
      id: "c1",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content } }],
    })
  const complete = (url: string) =>
    Effect.provide(
      AiGateway.use((g) => g.complete({ system: "s", messages: [{ role: "user", content: "hi" }] })),
      openAiGateway({ baseURL: url, apiKey: "k", model: "m", timeout: "5 seconds" }).pipe(Layer.provide(HttpClient.layer)),
    )

  it("an answer over 1 MiB is refused as too large", async () => {
    const s = await serve({ kind: "json", body: completion("a".repeat(2 * 1024 * 1024)) })
    const { exit } = await timedExit(complete(s.url))
    expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("response too large")
  })

  it("a normal answer passes", async () => {
    const s = await serve({ kind: "json", body: completion("Karibu!") })
    const { exit } = await timedExit(complete(s.url))
    expect(Exit.isSuccess(exit) && exit.value).toBe("Karibu!")
  })
})

describe("webhook receiver", () => {
  it("one deadline covers the DNS lookup: a slow answer fails the attempt in time", async () => {
    const dns = await startDnsServer({ "slow.hooks.test": { A: ["127.0.0.1"] }, "fast.hooks.test": { A: ["127.0.0.1"] } })
    cleanups.push(dns.close)
    const receiver = await serve({ kind: "json", body: "{}" })
    const port = new URL(receiver.url).port
    // Slower than the attempt's deadline, faster than the resolver's own timeout (2 s).
    dns.slow("slow.hooks.test", 1_200)
    const transport = webhookHttpLayer.pipe(Layer.provide(settings({ dnsServers: [dns.address], webhookAllowPrivate: true })))
    const post = (host: string, timeout: Duration.Input) =>
      Effect.provide(
        WebhookTransport.use((t) =>
          t.post({ url: `http://${host}:${port}/hook`, headers: { "content-type": "application/json" }, body: "{}", timeout: Duration.fromInputUnsafe(timeout) })
        ),
        transport,
      )
    const slow = await timedExit(post("slow.hooks.test", "500 millis"))
    expect(slow.ms).toBeLessThan(1_100)
    expect(Exit.isFailure(slow.exit) && JSON.stringify(slow.exit.cause)).toContain("timeout")
    expect(receiver.requests()).toBe(0)
    const fast = await timedExit(post("fast.hooks.test", "5 seconds"))
    expect(Exit.isSuccess(fast.exit) && fast.exit.value.status, JSON.stringify(fast.exit)).toBe(200)
  })
})

/** An SMTP relay that takes the message, then answers its end a byte every 200 ms, never finishing. */
const tricklingRelay = async () => {
  const sockets = new Set<net.Socket>()
  const timers = new Set<NodeJS.Timeout>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => {})
    socket.write("220 relay.test ESMTP\r\n")
    let inData = false
    let buffer = ""
    socket.on("data", (chunk) => {
      buffer += chunk.toString("latin1")
      if (inData) {
        if (!buffer.includes("\r\n.\r\n")) return
        inData = false
        buffer = ""
        const timer = setInterval(() => socket.write("2"), 200)
        timers.add(timer)
        socket.on("close", () => clearInterval(timer))
        return
      }
      let at: number
      while ((at = buffer.indexOf("\r\n")) !== -1) {
        const line = buffer.slice(0, at).toUpperCase()
        buffer = buffer.slice(at + 2)
        if (line.startsWith("EHLO")) socket.write("250-relay.test\r\n250 8BITMIME\r\n")
        else if (line.startsWith("DATA")) {
          inData = true
          socket.write("354 go ahead\r\n")
          return
        } else if (line.startsWith("QUIT")) socket.end("221 bye\r\n")
        else socket.write("250 OK\r\n")
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  cleanups.push(async () => {
    for (const t of timers) clearInterval(t)
    for (const s of sockets) s.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `smtp://127.0.0.1:${(server.address() as net.AddressInfo).port}`, open: () => sockets.size }
}

describe("SMTP relay", () => {
  it("outbound: a relay trickling its final reply fails the send at the deadline and loses the connection", async () => {
    const relay = await tricklingRelay()
    const send = OutboundMailer.use((m) =>
      m.send({
        userId: 1,
        messageId: 1,
        from: "noreply@inbox.localhost",
        to: [{ email: "asha@example.co.tz" }],
        cc: [],
        envelope: ["asha@example.co.tz"],
        returnPaths: ["bounces+1.0.0123456789@inbox.localhost"],
        subject: "Receipt",
        text: "Asante",
        attachments: [],
        headers: {},
        messageIdHeader: "m1@inbox.localhost",
        dkim: Option.none(),
      })
    )
    // The layer stays open (a pooled transport), so the closed connection is the abort's doing.
    const { exit, ms } = await timedExit(Effect.provide(
      Effect.gen(function*() {
        const result = yield* Effect.exit(send)
        yield* Effect.sleep("300 millis")
        return { result, open: relay.open() }
      }),
      relayOutboundMailer(relay.url, "1 second"),
    ))
    expect(ms).toBeLessThan(3_500)
    expect(Exit.isSuccess(exit)).toBe(true)
    if (!Exit.isSuccess(exit)) return
    expect(Exit.isFailure(exit.value.result) && JSON.stringify(exit.value.result.cause)).toContain("ETIMEDOUT")
    expect(exit.value.open).toBe(0)
  })

  it("platform mail: the same relay fails the send at the deadline", async () => {
    const relay = await tricklingRelay()
    const send = PlatformMailer.use((m) => m.send({ to: "asha@example.co.tz", subject: "Verify", text: "https://x/verify" }))
    const { exit, ms } = await timedExit(Effect.provide(send, relayPlatformMailer(relay.url, "noreply@inbox.localhost", "1 second")))
    expect(ms).toBeLessThan(3_000)
    expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("ETIMEDOUT")
  })
})
