/**
 * Production mode (DECISIONS.md "Production mode"): NODE_ENV=production refuses to start with
 * generated keys or an unconfigured provider, one line per missing item, unless each stand-in is
 * named explicitly; without NODE_ENV=production the embedded defaults stay. Which adapter runs
 * follows the explicit choice, else the provider's URL.
 */
import { ConfigProvider, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { chosenProviders } from "../../effects/config.ts"
import { loadSettings } from "../../src/config.ts"
import { providerReport } from "../../src/providers/report.ts"

const load = (env: Record<string, string>) =>
  Effect.runPromise(Effect.result(loadSettings(ConfigProvider.fromEnv({ env: { DATA_DIR: tmp(), ...env } }))))

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "prod-cfg-"))

const KEYS = { JWT_SECRET: "ab".repeat(32), SECRETS_KEY: "cd".repeat(32) }
const STAND_INS = { PAYMENT_PROVIDER: "fake", MAIL_TRANSPORT: "capture", SMS_PROVIDER: "log", PLATFORM_MAIL: "log" }
const LIVE = {
  PAYMENT_API_URL: "https://pay.example",
  PAYMENT_API_KEY: "pay-key",
  PAYMENT_WEBHOOK_SECRET: "pay-secret",
  SMTP_RELAY_URL: "smtp://u:p@relay.example:587",
  SMS_API_URL: "https://sms.example/send",
  SMS_API_KEY: "sms-key",
}

const failureLines = async (env: Record<string, string>) => {
  const r = await load(env)
  expect(r._tag).toBe("Failure")
  return r._tag === "Failure" ? r.failure.message.split("\n") : []
}

describe("NODE_ENV=production fails closed", () => {
  it("names every missing item, one line each", async () => {
    const lines = await failureLines({ NODE_ENV: "production" })
    expect(lines.map((l) => l.split(" ")[0])).toEqual(["JWT_SECRET", "SECRETS_KEY", "PAYMENT_API_URL", "SMTP_RELAY_URL", "SMTP_RELAY_URL", "SMS_API_URL"])
    for (const line of lines) expect(line).toMatch(/^[A-Z_]+ is not set: .+/)
    expect(lines.find((l) => l.startsWith("PAYMENT_API_URL"))).toContain("PAYMENT_PROVIDER=fake")
    expect(lines.join("\n")).toContain("MAIL_TRANSPORT=capture")
    expect(lines.join("\n")).toContain("PLATFORM_MAIL=log")
    expect(lines.join("\n")).toContain("SMS_PROVIDER=log")
  })

  it("does not count generated keys: JWT_SECRET and SECRETS_KEY must be given", async () => {
    const lines = await failureLines({ NODE_ENV: "production", ...STAND_INS, SECRETS_KEY: KEYS.SECRETS_KEY })
    expect(lines).toEqual([expect.stringMatching(/^JWT_SECRET is not set: /)])
  })

  it("asks for what a live provider needs besides its URL", async () => {
    const lines = await failureLines({
      NODE_ENV: "production",
      ...KEYS,
      ...STAND_INS,
      PAYMENT_PROVIDER: "http",
      PAYMENT_API_URL: LIVE.PAYMENT_API_URL,
      SMS_PROVIDER: "http",
      SMS_API_URL: LIVE.SMS_API_URL,
    })
    expect(lines.map((l) => l.split(" ")[0])).toEqual(["PAYMENT_API_KEY", "PAYMENT_WEBHOOK_SECRET", "SMS_API_KEY"])
  })

  it("starts with every stand-in named explicitly", async () => {
    const r = await load({ NODE_ENV: "production", ...KEYS, ...STAND_INS })
    expect(r._tag).toBe("Success")
    if (r._tag !== "Success") return
    expect(r.success.production).toBe(true)
    expect(chosenProviders(r.success)).toEqual({ payment: "fake", outboundMail: "capture", platformMail: "log", sms: "log" })
    // Production defaults: the MX on 25, webhooks to public addresses only (DECISIONS.md).
    expect(r.success.smtpPort).toBe(25)
    expect(r.success.webhookAllowPrivate).toBe(false)
  })

  it("starts with every provider configured", async () => {
    const r = await load({ NODE_ENV: "production", ...KEYS, ...LIVE })
    expect(r._tag).toBe("Success")
    if (r._tag !== "Success") return
    expect(chosenProviders(r.success)).toEqual({ payment: "http", outboundMail: "relay", platformMail: "relay", sms: "http" })
    expect(providerReport(r.success).filter((p) => p.kind === "stand-in")).toEqual([])
  })

  it("keeps explicit SMTP_PORT and WEBHOOK_ALLOW_PRIVATE", async () => {
    const r = await load({ NODE_ENV: "production", ...KEYS, ...STAND_INS, SMTP_PORT: "2525", WEBHOOK_ALLOW_PRIVATE: "true" })
    expect(r._tag === "Success" && [r.success.smtpPort, r.success.webhookAllowPrivate]).toEqual([2525, true])
  })
})

describe("outside production", () => {
  it("keeps the embedded defaults with nothing configured", async () => {
    for (const env of [{}, { NODE_ENV: "development" }, { NODE_ENV: "test" }] as Array<Record<string, string>>) {
      const r = await load(env)
      expect(r._tag).toBe("Success")
      if (r._tag !== "Success") continue
      expect(r.success.production).toBe(false)
      expect(chosenProviders(r.success)).toEqual({ payment: "fake", outboundMail: "capture", platformMail: "log", sms: "log" })
      expect([r.success.smtpPort, r.success.webhookAllowPrivate]).toEqual([2525, true])
    }
  })

  it("an explicit stand-in wins over a configured URL, per provider", async () => {
    const r = await load({ ...LIVE, MAIL_TRANSPORT: "capture", PAYMENT_PROVIDER: "fake" })
    expect(r._tag === "Success" && chosenProviders(r.success)).toEqual({ payment: "fake", outboundMail: "capture", platformMail: "relay", sms: "http" })
  })

  it("refuses an unknown choice, and a live choice without its URL, in any mode", async () => {
    expect(await failureLines({ PAYMENT_PROVIDER: "stripe" })).toEqual(['Invalid setting PAYMENT_PROVIDER: expected one of fake, http, got "stripe"'])
    expect(await failureLines({ MAIL_TRANSPORT: "relay", SMS_PROVIDER: "http" })).toEqual([
      "Invalid setting MAIL_TRANSPORT: relay needs SMTP_RELAY_URL",
      "Invalid setting SMS_PROVIDER: http needs SMS_API_URL",
    ])
  })
})

describe("the start-up report", () => {
  it("has one line per provider, real or stand-in, with hosts and never credentials", async () => {
    const r = await load({ ...LIVE, AI_BASE_URL: "https://ai.example/v1", AI_API_KEY: "sk-secret" })
    expect(r._tag).toBe("Success")
    if (r._tag !== "Success") return
    const report = providerReport(r.success)
    expect(report.map((p) => [p.provider, p.kind])).toEqual([
      ["payments", "real"],
      ["outbound-mail", "real"],
      ["platform-mail", "real"],
      ["sms", "real"],
      ["ai", "real"],
      ["google", "not configured"],
    ])
    expect(report.find((p) => p.provider === "outbound-mail")!.adapter).toBe("SMTP relay at relay.example:587")
    const text = JSON.stringify(report)
    for (const secret of ["u:p", "pay-key", "sms-key", "sk-secret"]) expect(text).not.toContain(secret)
    const embedded = await load({})
    expect(embedded._tag === "Success" && providerReport(embedded.success).map((p) => p.kind)).toEqual([
      "stand-in",
      "stand-in",
      "stand-in",
      "stand-in",
      "not configured",
      "not configured",
    ])
    expect(Option.isNone(embedded._tag === "Success" ? embedded.success.paymentApiUrl : Option.some(""))).toBe(true)
  })
})
