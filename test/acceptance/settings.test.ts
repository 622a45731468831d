/**
 * Acceptance: every setting DECISIONS.md names is read from exactly that environment variable
 * (an operator or a test harness configures the service by these names only), with the
 * documented embedded defaults.
 */
import { ConfigProvider, Duration, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { loadSettings } from "../../src/config.ts"

const load = (env: Record<string, string>) => Effect.runPromise(loadSettings(ConfigProvider.fromEnv({ env })))
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "acc-cfg-"))
const some = <A>(o: Option.Option<A>) => Option.getOrUndefined(o)

describe("environment variables of DECISIONS.md", () => {
  it("each lands in its setting", async () => {
    const key1 = "ab".repeat(32)
    const key2 = "cd".repeat(32)
    const s = await load({
      BASE_URL: "https://api.example.co.tz",
      PLATFORM_DOMAIN: "mail.example.co.tz",
      MX_HOST: "mx1.example.co.tz",
      MAIL_SERVER_IP: "203.0.113.7",
      SMTP_PORT: "25",
      SANDBOX_SMTP_HOST: "sandbox.example.co.tz",
      SANDBOX_SMTP_PORT: "2626",
      PORT: "9090",
      DATABASE_URL: "postgres://u@db:5432/mail",
      DATA_DIR: tmp(),
      JWT_SECRET: key1,
      SECRETS_KEY: key2,
      REQUIRE_PHONE_FOR_OUTBOUND: "true",
      WEBHOOK_ALLOW_PRIVATE: "false",
      WEBHOOK_MAX_ATTEMPTS: "5",
      DOMAIN_RECHECK_INTERVAL: "5m",
      DNS_SERVERS: "127.0.0.1:5353",
      SMTP_RELAY_URL: "smtp://u:p@relay:587",
      PLATFORM_FROM: "hello@mail.example.co.tz",
      SMS_API_URL: "https://sms.example/send",
      SMS_API_KEY: "sms-key",
      SMS_SENDER_ID: "MYSENDER",
      PAYMENT_API_URL: "https://pay.example",
      PAYMENT_API_KEY: "pay-key",
      PAYMENT_WEBHOOK_SECRET: "pay-secret",
      AI_BASE_URL: "https://ai.example/v1",
      AI_API_KEY: "ai-key",
      AI_MODEL: "model-x",
      GOOGLE_CLIENT_ID: "client.apps.googleusercontent.com",
      GOOGLE_JWKS_URL: "https://jwks.example/certs",
    })
    expect(s).toMatchObject({
      baseUrl: "https://api.example.co.tz",
      platformDomain: "mail.example.co.tz",
      mxHost: "mx1.example.co.tz",
      mailServerIp: "203.0.113.7",
      smtpPort: 25,
      sandboxSmtpHost: "sandbox.example.co.tz",
      sandboxSmtpPort: 2626,
      port: 9090,
      requirePhoneForOutbound: true,
      webhookAllowPrivate: false,
      webhookMaxAttempts: 5,
      dnsServers: ["127.0.0.1:5353"],
      platformFrom: "hello@mail.example.co.tz",
      smsSenderId: "MYSENDER",
      paymentWebhookSecret: "pay-secret",
      aiModel: "model-x",
      googleJwksUrl: "https://jwks.example/certs",
    })
    expect(some(s.databaseUrl)).toBe("postgres://u@db:5432/mail")
    expect(Buffer.from(s.jwtSecret).toString("hex")).toBe(key1)
    expect(Buffer.from(s.secretsKey).toString("hex")).toBe(key2)
    expect(Duration.toMillis(s.domainRecheckInterval)).toBe(300_000)
    expect(some(s.smtpRelayUrl)).toBe("smtp://u:p@relay:587")
    expect(some(s.smsApiUrl)).toBe("https://sms.example/send")
    expect(some(s.smsApiKey)).toBe("sms-key")
    expect(some(s.paymentApiUrl)).toBe("https://pay.example")
    expect(some(s.paymentApiKey)).toBe("pay-key")
    expect(some(s.aiBaseUrl)).toBe("https://ai.example/v1")
    expect(some(s.aiApiKey)).toBe("ai-key")
    expect(some(s.googleClientId)).toBe("client.apps.googleusercontent.com")
  })

  it("embedded defaults: BASE_URL http://localhost:8080, PORT 8080, SMTP 2525, sandbox localhost:2526, PGlite in ./data", async () => {
    const dir = tmp()
    const s = await load({ DATA_DIR: dir })
    expect(s).toMatchObject({
      baseUrl: "http://localhost:8080",
      port: 8080,
      platformDomain: "inbox.localhost",
      mxHost: "mx.inbox.localhost",
      mailServerIp: "127.0.0.1",
      smtpPort: 2525,
      sandboxSmtpHost: "localhost",
      sandboxSmtpPort: 2526,
      platformFrom: "noreply@inbox.localhost",
      webhookAllowPrivate: true,
      webhookMaxAttempts: 3,
    })
    expect(Option.isNone(s.databaseUrl)).toBe(true)
    expect(Duration.toMillis(s.domainRecheckInterval)).toBe(3_600_000)
    // Unset secrets are generated once and kept in DATA_DIR (so PAYMENT_WEBHOOK_SECRET is stable across restarts).
    const again = await load({ DATA_DIR: dir })
    expect(again.paymentWebhookSecret).toBe(s.paymentWebhookSecret)
    expect(s.paymentWebhookSecret.length).toBeGreaterThanOrEqual(32)
    expect(Buffer.from(again.jwtSecret).equals(Buffer.from(s.jwtSecret))).toBe(true)
  })
})
