/**
 * The platform's mail and SMS adapters: the nodemailer relay against a real local SMTP server,
 * the SMS HTTP contract against msw (platform key and a per-call customer key), the log
 * defaults, and their selection from settings inside the running app.
 */
import { Effect, Layer, Logger, Option, References } from "effect"
import { simpleParser } from "mailparser"
import { http, HttpResponse } from "msw"
import { setupServer } from "msw/node"
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../effects/config.ts"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { PlatformMailer } from "../../effects/ports/PlatformMailer.ts"
import { SmsGateway } from "../../effects/ports/SmsGateway.ts"
import { logPlatformMailer, relayPlatformMailer } from "../../src/providers/platform-mailer.ts"
import { httpSmsGateway, logSmsGateway } from "../../src/providers/sms.ts"
import { testSettings } from "../support/app.ts"
import { freshEmail, freshPhone, makeAuthTestApp, PASSWORD } from "../support/auth.ts"

// ---- a real SMTP server on a free port -------------------------------------------------------
interface Received {
  readonly from: string
  readonly to: ReadonlyArray<string>
  readonly raw: string
}
const received: Array<Received> = []
let smtp: SMTPServer
let smtpPort = 0

// ---- the SMS provider, mocked --------------------------------------------------------------------
const SMS_URL = "https://sms-provider.test/v1/send"
interface SmsCall {
  readonly authorization: string | null
  readonly body: any
}
const smsCalls: Array<SmsCall> = []
let smsStatus = 200
const sms = setupServer(
  http.post(SMS_URL, async ({ request }) => {
    smsCalls.push({ authorization: request.headers.get("authorization"), body: await request.json() })
    if (smsStatus !== 200) return HttpResponse.json({ error: "bad key sk_live_secret" }, { status: smsStatus })
    return HttpResponse.json({ message_id: `m-${smsCalls.length}` })
  }),
)

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString("utf8"),
        })
        callback()
      })
    },
  })
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", () => resolve()))
  smtpPort = (smtp.server.address() as AddressInfo).port
  sms.listen({ onUnhandledFrame: "bypass" })
})
afterAll(async () => {
  sms.close()
  await new Promise<void>((resolve) => smtp.close(() => resolve()))
})

const waitFor = async <T>(find: () => T | undefined, ms = 5000): Promise<T> => {
  const until = Date.now() + ms
  for (;;) {
    const found = find()
    if (found !== undefined) return found
    if (Date.now() > until) throw new Error("timed out waiting")
    await new Promise((r) => setTimeout(r, 20))
  }
}

const smsLayer = (overrides: Parameters<typeof testSettings>[0] = {}) =>
  httpSmsGateway(SMS_URL).pipe(
    Layer.provide(Layer.mergeAll(
      Layer.succeed(AppConfig, AppConfig.of(testSettings({ smsApiKey: Option.some("platform-key"), smsSenderId: "TZMAIL", ...overrides }))),
      HttpClient.layer,
    )),
  )
const runSms = <A, E>(effect: Effect.Effect<A, E, SmsGateway>, layer = smsLayer()) =>
  Effect.runPromiseExit(Effect.provide(effect, layer))

const captureLogs = () => {
  const lines: Array<string> = []
  const layer = Layer.mergeAll(
    Logger.layer([Logger.make((o) => void lines.push(Logger.formatJson.log(o)))]),
    Layer.succeed(References.MinimumLogLevel, "Info"),
  )
  return { lines, layer }
}

describe("SMTP relay adapter", () => {
  it("delivers a platform mail from PLATFORM_FROM", async () => {
    const to = freshEmail()
    await Effect.runPromise(
      Effect.gen(function*() {
        const mailer = yield* PlatformMailer
        yield* mailer.send({ to, subject: "Hello", text: "plain body" })
      }).pipe(Effect.provide(relayPlatformMailer(`smtp://127.0.0.1:${smtpPort}`, "noreply@inbox.localhost"))),
    )
    const mail = await waitFor(() => received.find((r) => r.to.includes(to)))
    expect(mail.from).toBe("noreply@inbox.localhost")
    const parsed = await simpleParser(mail.raw)
    expect(parsed.subject).toBe("Hello")
    expect(parsed.text?.trim()).toBe("plain body")
  })

  it("fails with PROVIDER_ERROR when the relay is unreachable", async () => {
    const exit = await Effect.runPromiseExit(
      Effect.gen(function*() {
        const mailer = yield* PlatformMailer
        yield* mailer.send({ to: "a@example.co.tz", subject: "x", text: "x" })
      }).pipe(Effect.provide(relayPlatformMailer("smtp://127.0.0.1:1", "noreply@inbox.localhost"))),
    )
    expect(exit._tag).toBe("Failure")
    expect(JSON.stringify(exit)).toContain("ProviderError")
  })

  it("carries the verification link of a registration, which then verifies the email", async () => {
    const { api } = await makeAuthTestApp({
      capture: false,
      settings: { smtpRelayUrl: Option.some(`smtp://127.0.0.1:${smtpPort}`), platformFrom: "accounts@inbox.localhost" },
    })
    try {
      const email = freshEmail()
      const reg = await api.call("POST", "/api/auth/register", { body: { name: "Relay", password: PASSWORD, email } })
      expect(reg.status).toBe(200)
      const mail = await waitFor(() => received.find((r) => r.to.includes(email)))
      expect(mail.from).toBe("accounts@inbox.localhost")
      const parsed = await simpleParser(mail.raw)
      const link = /(http:\/\/localhost:8080\/verify-email\?token=\S+)/.exec(parsed.text ?? "")?.[1]
      expect(link).toBeDefined()
      const token = decodeURIComponent(new URL(link!).searchParams.get("token")!)
      const verified = await api.call("POST", "/api/auth/email/verify", { body: { token } })
      expect(verified.status).toBe(200)
      const me = await api.call("GET", "/api/auth/me", { token: reg.body.data.token })
      expect(me.body.data.user.email_verified).toBe(true)
    } finally {
      await api.stop()
    }
  })
})

describe("SMS HTTP adapter", () => {
  it("posts {to, message, sender_id} with the platform key and returns the message_id", async () => {
    const exit = await runSms(SmsGateway.use((g) => g.send({ to: "+255712345678", message: "Your code is 123456" })))
    expect(exit).toMatchObject({ _tag: "Success", value: { messageId: `m-${smsCalls.length}` } })
    expect(smsCalls.at(-1)).toEqual({
      authorization: "Bearer platform-key",
      body: { to: "+255712345678", message: "Your code is 123456", sender_id: "TZMAIL" },
    })
  })

  it("sends with a per-call key and sender id (a customer's own provider key)", async () => {
    const exit = await runSms(
      SmsGateway.use((g) => g.send({ to: "+255612345678", message: "New mail" }, { apiKey: "customer-key", senderId: "ACME" })),
    )
    expect(exit._tag).toBe("Success")
    expect(smsCalls.at(-1)).toMatchObject({ authorization: "Bearer customer-key", body: { sender_id: "ACME" } })
  })

  it("accepts a 2xx without a body as sent, with no message id", async () => {
    sms.use(http.post(SMS_URL, () => new HttpResponse(null, { status: 204 })))
    try {
      const exit = await runSms(SmsGateway.use((g) => g.send({ to: "+255712345678", message: "x" })))
      expect(exit).toMatchObject({ _tag: "Success", value: { messageId: null } })
    } finally {
      sms.resetHandlers()
    }
  })

  it("fails with PROVIDER_ERROR on non-2xx, keeping the provider's text out of the error", async () => {
    smsStatus = 401
    try {
      const exit = await runSms(SmsGateway.use((g) => g.send({ to: "+255712345678", message: "x" })))
      expect(exit._tag).toBe("Failure")
      const text = JSON.stringify(exit)
      expect(text).toContain("ProviderError")
      expect(text).toContain("HTTP 401")
      expect(text).not.toContain("sk_live_secret")
    } finally {
      smsStatus = 200
    }
  })

  it("fails with PROVIDER_ERROR when the provider cannot be reached", async () => {
    const exit = await runSms(
      SmsGateway.use((g) => g.send({ to: "+255712345678", message: "x" })),
      httpSmsGateway("http://127.0.0.1:1/send").pipe(Layer.provide(Layer.mergeAll(
        Layer.succeed(AppConfig, AppConfig.of(testSettings({ smsApiKey: Option.some("k") }))),
        HttpClient.layer,
      ))),
    )
    expect(JSON.stringify(exit)).toContain("ProviderError")
  })

  it("answers NOT_CONFIGURED when neither SMS_API_KEY nor a per-call key is there", async () => {
    const exit = await runSms(
      SmsGateway.use((g) => g.send({ to: "+255712345678", message: "x" })),
      smsLayer({ smsApiKey: Option.none() }),
    )
    expect(JSON.stringify(exit)).toContain("NotConfigured")
  })

  it("uses the HttpClient port's fetch", async () => {
    const seen: Array<string> = []
    const layer = httpSmsGateway("https://not-reached.test/send").pipe(Layer.provide(Layer.mergeAll(
      Layer.succeed(AppConfig, AppConfig.of(testSettings({ smsApiKey: Option.some("k") }))),
      Layer.succeed(HttpClient, HttpClient.of({ fetch: async (input) => (seen.push(String(input)), new Response("{}", { status: 200 })) })),
    )))
    const exit = await runSms(SmsGateway.use((g) => g.send({ to: "+255712345678", message: "x" })), layer)
    expect(exit._tag).toBe("Success")
    expect(seen).toEqual(["https://not-reached.test/send"])
  })

  it("carries the OTP of a phone registration when SMS_API_URL is set", async () => {
    const { api } = await makeAuthTestApp({ capture: false, settings: { smsApiUrl: Option.some(SMS_URL), smsApiKey: Option.some("platform-key") } })
    try {
      const phone = freshPhone()
      const reg = await api.call("POST", "/api/auth/register", { body: { name: "Sms", password: PASSWORD, phone_number: phone } })
      expect(reg.status).toBe(200)
      const call = smsCalls.findLast((c) => c.body.to === phone)!
      expect(call.authorization).toBe("Bearer platform-key")
      const code = /(\d{6})/.exec(call.body.message)![1]
      const verified = await api.call("POST", "/api/auth/phone/verify", { token: reg.body.data.token, body: { code } })
      expect(verified.status).toBe(200)
      expect(verified.body.data.user.phone_verified).toBe(true)
    } finally {
      await api.stop()
    }
  })
})

describe("log adapters (embedded default)", () => {
  it("write the link and the code to the service log", async () => {
    const logs = captureLogs()
    await Effect.runPromise(
      Effect.gen(function*() {
        yield* (yield* PlatformMailer).send({ to: "dev@example.co.tz", subject: "Verify", text: "open http://localhost:8080/verify-email?token=abc" })
        yield* (yield* SmsGateway).send({ to: "+255712345678", message: "Your verification code is 654321." }, { apiKey: "never-logged" })
      }).pipe(Effect.provide(Layer.mergeAll(logPlatformMailer, logSmsGateway, logs.layer))),
    )
    const all = logs.lines.join("\n")
    expect(all).toContain("verify-email?token=abc")
    expect(all).toContain(`"mail_links":["http://localhost:8080/verify-email?token=abc"]`)
    expect(all).toContain("dev@example.co.tz")
    expect(all).toContain("654321")
    expect(all).not.toContain("never-logged")
  })

  it("are what the app uses with nothing configured", async () => {
    const logs = captureLogs()
    const { api } = await makeAuthTestApp({ capture: false })
    try {
      const email = freshEmail()
      const out = await api.run(Effect.gen(function*() {
        const mailer = yield* PlatformMailer
        yield* mailer.send({ to: email, subject: "s", text: "link" })
        return "sent"
      }).pipe(Effect.provide(logs.layer)))
      expect(out).toBe("sent")
      expect(logs.lines.join("\n")).toContain(email)
    } finally {
      await api.stop()
    }
  })
})
