/**
 * The monthly capture allowance, with a small cap (SandboxLimits) and a clock the test moves
 * across a month boundary; and the allowance under concurrent captures.
 */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SandboxLimits } from "../../effects/sandbox/limits.ts"
import { Sandbox } from "../../effects/sandbox/service.ts"
import { createAccount } from "../support/accounts.ts"
import { shiftedClock } from "../support/clock.ts"
import { transaction } from "../support/smtp-client.ts"
import { plainMessage } from "../support/inbound.ts"
import { capturedCount, createCredential, query, type SandboxTestApp, signedIn, startSandboxApp } from "./support.ts"

const CAP = 3
const clock = shiftedClock()
let app: SandboxTestApp
beforeAll(async () => {
  app = await startSandboxApp({ infrastructure: Layer.mergeAll(clock.layer, Layer.succeed(SandboxLimits, { monthlyCaptures: CAP })) })
})
afterAll(() => app.stop())

/** Moves the app's clock to `iso` and holds it there. */
const setClock = (iso: string) => {
  clock.freeze()
  clock.advance(Date.parse(iso) - clock.now())
}

const send = (smtp: Awaited<ReturnType<typeof signedIn>>, subject: string) =>
  transaction(smtp, { from: "app@app.example", to: ["dev@customer.example"], raw: plainMessage({ subject }) })

const usage = async (apiKey: string) => (await app.api.call("GET", "/api/sandbox/usage", { token: apiKey })).body.data

describe("the monthly capture allowance", () => {
  it("refuses mail past the cap with 452 4.2.2 until the next calendar month (UTC); clearing gives nothing back", async () => {
    setClock("2027-01-31T23:58:00.000Z")
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const smtp = await signedIn(app.port, c.client_id, c.client_secret)
    for (let i = 0; i < CAP; i++) expect((await send(smtp, `jan ${i}`)).data?.code).toBe(250)

    const refused = await send(smtp, "one too many")
    expect(refused.rcpts[0]!.code).toBe(452)
    expect(refused.rcpts[0]!.text).toMatch(/^4\.2\.2 Sandbox capture limit reached: .*3 messages for 2027-01; capture resumes on 2027-02-01/)
    expect(refused.data).toBeUndefined()
    expect(await usage(apiKey)).toEqual({ month: "2027-01", captured: 3, limit: 3, remaining: 0 })

    const cleared = await app.api.call("DELETE", "/api/sandbox/messages", { token: apiKey })
    expect(cleared.body.data.deleted_count).toBe(3)
    expect((await send(smtp, "after clearing")).rcpts[0]!.code).toBe(452)

    // 23:59:59.999 is still January; the first millisecond of February opens a new allowance.
    clock.advance(119_999)
    expect((await send(smtp, "still january")).rcpts[0]!.code).toBe(452)
    clock.advance(1)
    const february = await send(smtp, "february")
    expect(february.data?.code).toBe(250)
    smtp.destroy()
    expect(await usage(apiKey)).toEqual({ month: "2027-02", captured: 1, limit: 3, remaining: 2 })
    expect(await capturedCount(app.api, userId)).toBe(1)
    const months = await query<{ month: string; captured: number }>(
      app.api,
      "SELECT to_char(month, 'YYYY-MM') AS month, captured FROM sandbox_usage WHERE user_id = $1 ORDER BY month",
      [userId],
    )
    expect(months).toEqual([{ month: "2027-01", captured: 3 }, { month: "2027-02", captured: 1 }])
  })

  it("the end of DATA is authoritative: two sessions admitted for the last capture get one 250 and one 452", async () => {
    setClock("2027-03-10T12:00:00.000Z")
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const first = await signedIn(app.port, c.client_id, c.client_secret)
    for (let i = 0; i < CAP - 1; i++) expect((await send(first, `m${i}`)).data?.code).toBe(250)
    const second = await signedIn(app.port, c.client_id, c.client_secret)
    for (const smtp of [first, second]) {
      expect((await smtp.command("MAIL FROM:<app@app.example>")).code).toBe(250)
      expect((await smtp.command("RCPT TO:<dev@customer.example>")).code).toBe(250)
      expect((await smtp.command("DATA")).code).toBe(354)
    }
    const [a, b] = await Promise.all(
      [first, second].map((smtp) => {
        smtp.write(`Subject: last\r\n\r\nlast one\r\n.\r\n`)
        return smtp.reply()
      }),
    )
    expect([a!.code, b!.code].sort()).toEqual([250, 452])
    expect([a!.text, b!.text].find((t) => t.startsWith("4.2.2"))).toBeDefined()
    first.destroy()
    second.destroy()
    expect(await capturedCount(app.api, userId)).toBe(CAP)
  })

  it("concurrent captures never pass the cap (one conditional upsert per capture)", async () => {
    setClock("2027-04-01T00:00:00.000Z")
    const { userId } = await createAccount(app.api)
    const raw = Buffer.from(plainMessage({ subject: "race" }))
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        app.api.run(Effect.result(Sandbox.use((s) => s.capture(userId, null, { raw, mailFrom: "a@app.example", recipients: ["b@c.example"] }))))),
    )
    const ok = results.filter((r) => r._tag === "Success")
    const refused = results.filter((r) => r._tag === "Failure").map((r) => (r._tag === "Failure" ? r.failure._tag : ""))
    expect(ok).toHaveLength(CAP)
    expect(refused).toEqual(Array.from({ length: 12 - CAP }, () => "LimitReached"))
    expect(await capturedCount(app.api, userId)).toBe(CAP)
  })
})
