/**
 * The Bounces service against the real send path: a message goes through a local SMTP relay,
 * each recipient's VERP return path is taken from what the relay saw, and real-format reports are
 * processed for it the way the MX will (parseReturnPath, then process with the raw bytes):
 * feedback on the recipient, the suppression list, events queued for endpoints, free of charge,
 * and forged or stale return paths refused.
 */
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { Bounces } from "../../effects/bounces/service.ts"
import { returnPath } from "../../effects/bounces/verp.ts"
import type { TestApp } from "../support/app.ts"
import { balance, fundedAccount, makeOutboundApp, query, rcpt, send, startRelay, type TestRelay } from "../outbound/support.ts"
import { bounceFixture, feedBounce, parseReturnPath, sendThroughRelay } from "./support.ts"

let relay: TestRelay
let api: TestApp
beforeAll(async () => {
  relay = await startRelay()
  api = await makeOutboundApp({ relayUrl: relay.url })
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
})
beforeEach(() => relay.reset())

const key = () => ({ secret: api.settings.secretsKey, domain: api.settings.platformDomain })

const JUMA = "juma.hamisi.8842@gmail.com"
const HALIMA = "halima.omari@yahoo.com"
const MWANAISHA = "mwanaisha@zanzibar-spice.co.tz"

const recipientsOf = async (account: { apiKey: string }, id: number) =>
  (await api.call("GET", `/api/outbound/emails/${id}`, { token: account.apiKey })).body.data.recipients as Array<
    { email: string; status: string; feedback: null | { type: string; smtp_code: string | null; diagnostic: string | null; at: string } }
  >

const invalid = async (address: string) => {
  const exit = await api.run(Effect.exit(Bounces.use((b) => b.parseReturnPath(address))))
  return Exit.isFailure(exit) && JSON.stringify(exit.cause).includes("InvalidReturnPath")
}

describe("return paths", () => {
  it("each recipient's MAIL FROM names its message and position, and parses back", async () => {
    const a = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, a, [JUMA, HALIMA, MWANAISHA])
    expect([...sent.returnPaths.values()].every((p) => /^bounces\+\d+\.[0-2]\.[0-9a-f]{10}@inbox\.localhost$/.test(p))).toBe(true)
    for (const [i, email] of [JUMA, HALIMA, MWANAISHA].entries()) {
      const path = sent.returnPaths.get(email)!
      expect(path).toBe(returnPath(key(), sent.id, i))
      expect(await parseReturnPath(api, path)).toEqual({ emailId: sent.id, recipientIndex: i })
      // MTAs may change the case of what they echo back.
      expect(await parseReturnPath(api, path.toUpperCase())).toEqual({ emailId: sent.id, recipientIndex: i })
      expect(await api.run(Bounces.use((b) => Effect.succeed(b.isReturnPath(path))))).toBe(true)
    }
  })

  it("refuses forged tags, other keys, unknown messages and positions, other domains and non-canonical forms", async () => {
    const a = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, a, [JUMA])
    const good = sent.returnPaths.get(JUMA)!
    const tag = /\.([0-9a-f]{10})@/.exec(good)![1]!
    const flipped = good.replace(tag, tag.slice(0, 9) + (tag[9] === "0" ? "1" : "0"))
    const otherKey = returnPath({ secret: new Uint8Array(32).fill(7), domain: "inbox.localhost" }, sent.id, 0)
    const cases = [
      flipped,
      otherKey,
      returnPath(key(), 987_654_321, 0), // a correct tag for a message that does not exist
      returnPath(key(), sent.id, 1), // a position the message does not have
      good.replace("@inbox.localhost", "@elsewhere.example"),
      good.replace(`bounces+${sent.id}.`, `bounces+0${sent.id}.`),
      good.replace(".0.", ".00."),
      `bounces+${sent.id}.0@inbox.localhost`,
      `bounces@inbox.localhost`,
      `info@inbox.localhost`,
      "",
      "bounces+1.0.zzzzzzzzzz@inbox.localhost",
    ]
    for (const address of cases) expect(await invalid(address), address).toBe(true)
    const recognised = await api.run(Bounces.use((b) => Effect.succeed(cases.map((c) => b.isReturnPath(c)))))
    // The shape alone is what routes RCPT to the bounce intake; the tag and the database decide after.
    expect(recognised).toEqual([true, true, true, true, false, false, false, false, false, false, false, false])
  })
})

describe("processing", () => {
  it("a 5.1.1 DSN: feedback bounced, status unchanged, suppressed, the next send refused, nothing charged", async () => {
    const a = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, a, [JUMA, HALIMA])
    const before = await balance(api, a.userId)
    const outcome = await feedBounce(api, sent.returnPaths.get(JUMA)!, bounceFixture("gmail-dsn-5.1.1.eml"))
    expect(outcome).toMatchObject({ _tag: "Recorded", emailId: sent.id, recipient: JUMA, type: "bounced", smtpCode: "5.1.1", suppressed: true })
    const [juma, halima] = await recipientsOf(a, sent.id)
    expect(juma).toMatchObject({ email: JUMA, status: "sent", feedback: { type: "bounced", smtp_code: "5.1.1" } })
    expect(juma!.feedback!.diagnostic).toMatch(/^550-5\.1\.1 The email account/)
    expect(juma!.feedback!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(halima).toMatchObject({ status: "sent", feedback: null })
    const list = await api.call("GET", "/api/outbound/suppressions", { token: a.apiKey })
    expect(list.body.data).toEqual([expect.objectContaining({ email: JUMA, reason: "bounced", provider_code: 550, message_id: sent.id })])
    const again = await send(api, a, { to: [JUMA], subject: "s", text_body: "t" })
    expect(again.status).toBe(400)
    expect(again.body.errors[0].code).toBe("SUPPRESSED")
    expect(await balance(api, a.userId)).toBe(before)
  })

  it("an ARF abuse report: feedback complained and suppressed", async () => {
    const a = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, a, [JUMA, HALIMA])
    const outcome = await feedBounce(api, sent.returnPaths.get(HALIMA)!, bounceFixture("arf-yahoo-abuse.eml"), "feedback@arf.mail.yahoo.com")
    expect(outcome).toMatchObject({ _tag: "Recorded", type: "complained", smtpCode: null, suppressed: true })
    const [, halima] = await recipientsOf(a, sent.id)
    expect(halima!.feedback).toMatchObject({ type: "complained", smtp_code: null, diagnostic: "feedback-type: abuse; user-agent: Yahoo!-Mail-Feedback/2.0" })
    const rows = await query(api, "SELECT email, reason FROM suppressions WHERE user_id = $1", [a.userId])
    expect(rows).toEqual([{ email: HALIMA, reason: "complained" }])
  })

  it("a 4.x.x delay is deferred and not suppressed; a later bounce upgrades it; a delay after that changes nothing", async () => {
    const a = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, a, [MWANAISHA])
    const path = sent.returnPaths.get(MWANAISHA)!
    expect(await feedBounce(api, path, bounceFixture("exim-delayed.eml"))).toMatchObject({ type: "deferred", smtpCode: "4.2.2", suppressed: false })
    expect((await recipientsOf(a, sent.id))[0]!.feedback).toMatchObject({ type: "deferred", smtp_code: "4.2.2" })
    expect(await query(api, "SELECT email FROM suppressions WHERE user_id = $1", [a.userId])).toEqual([])
    // The same address fails for good a day later (Exim's permanent notice, reworded for this recipient).
    const failed = bounceFixture("exim-failed.eml").toString("utf8").replaceAll("bakari@", "mwanaisha@")
    expect(await feedBounce(api, path, Buffer.from(failed))).toMatchObject({ type: "bounced", smtpCode: "5.2.1", suppressed: true })
    expect(await feedBounce(api, path, bounceFixture("exim-delayed.eml"))).toEqual({ _tag: "Ignored", reason: "already bounced" })
    expect((await recipientsOf(a, sent.id))[0]!.feedback).toMatchObject({ type: "bounced", smtp_code: "5.2.1" })
  })

  it("what is not a bounce (an out-of-office reply, a success DSN) changes nothing", async () => {
    const a = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, a, [JUMA])
    const path = sent.returnPaths.get(JUMA)!
    expect(await feedBounce(api, path, bounceFixture("out-of-office.eml"), "hassani@example.co.tz")).toMatchObject({ _tag: "Ignored" })
    expect(await feedBounce(api, path, bounceFixture("dsn-delivered-2.0.0.eml"))).toMatchObject({ _tag: "Ignored" })
    expect((await recipientsOf(a, sent.id))[0]!.feedback).toBeNull()
    expect(await query(api, "SELECT email FROM suppressions WHERE user_id = $1", [a.userId])).toEqual([])
  })

  it("the same report delivered again (a sender's retry) records nothing and sends no second event", async () => {
    const a = await fundedAccount(api, 100)
    await api.call("POST", "/api/webhook/endpoints", { token: a.apiKey, body: { url: "https://hooks.example.co.tz/mail", events: ["email.bounced"] } })
    const sent = await sendThroughRelay(api, relay, a, [JUMA])
    const path = sent.returnPaths.get(JUMA)!
    expect(await feedBounce(api, path, bounceFixture("gmail-dsn-5.1.1.eml"))).toMatchObject({ _tag: "Recorded", type: "bounced" })
    expect(await feedBounce(api, path, bounceFixture("gmail-dsn-5.1.1.eml"))).toEqual({ _tag: "Ignored", reason: "already bounced" })
    const events = await query(api, "SELECT event FROM event_deliveries WHERE endpoint_id = ANY(SELECT id FROM event_endpoints WHERE user_id = $1)", [a.userId])
    expect(events).toEqual([{ event: "email.bounced" }])
  })

  it("suppresses for the sending account only", async () => {
    const [a, b] = [await fundedAccount(api, 100), await fundedAccount(api, 100)]
    const sent = await sendThroughRelay(api, relay, a, [JUMA])
    await feedBounce(api, sent.returnPaths.get(JUMA)!, bounceFixture("gmail-dsn-5.1.1.eml"))
    expect((await send(api, b, { to: [JUMA], subject: "s", text_body: "t" })).status).toBe(201)
    expect((await send(api, a, { to: [JUMA, rcpt()], subject: "s", text_body: "t" })).body.data.amount_tzs).toBe(5)
  })

  it("queues the event only for endpoints subscribed to it, with the documented payload", async () => {
    const a = await fundedAccount(api, 100)
    const make = async (events: Array<string>) =>
      (await api.call("POST", "/api/webhook/endpoints", { token: a.apiKey, body: { url: "https://hooks.example.co.tz/mail", events } })).body.data.id as number
    const bouncedOnly = await make(["email.bounced"])
    const deferredOnly = await make(["email.deferred"])
    const sent = await sendThroughRelay(api, relay, a, [JUMA])
    await feedBounce(api, sent.returnPaths.get(JUMA)!, bounceFixture("gmail-dsn-5.1.1.eml"))
    const rows = await query<{ endpoint_id: number; event: string; email_id: number; body: string; status: string }>(
      api,
      "SELECT endpoint_id, event, email_id, body, status FROM event_deliveries WHERE endpoint_id = ANY(SELECT id FROM event_endpoints WHERE user_id = $1)",
      [a.userId],
    )
    expect(rows.map((r) => [r.endpoint_id, r.event, r.status])).toEqual([[bouncedOnly, "email.bounced", "pending"]])
    expect(rows.some((r) => r.endpoint_id === deferredOnly)).toBe(false)
    const payload = JSON.parse(rows[0]!.body)
    expect(Object.keys(payload)).toEqual(["event", "email_id", "recipient", "status", "smtp_code", "diagnostic", "timestamp"])
    expect(payload).toMatchObject({ event: "email.bounced", email_id: sent.id, recipient: JUMA, status: "bounced", smtp_code: "5.1.1" })
    expect(payload.diagnostic).toMatch(/^550-5\.1\.1/)
    expect(payload.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  })
})
