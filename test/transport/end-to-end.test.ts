/**
 * Issue 12's "done when", end to end on the running service (workers on, real sockets, both
 * databases via TEST_DATABASE_URL): a message goes out through a local SMTP relay with a VERP
 * return path per recipient; a real-format DSN comes back for one recipient and an ARF report for
 * the other; both recipients carry feedback, both are suppressed, the next send to them is
 * refused as SUPPRESSED, and an account endpoint receives signed `email.bounced` and
 * `email.complained` events.
 *
 * Phase 1 hands the reports to the Bounces service exactly as the MX will (parseReturnPath, then
 * process with the raw bytes and MAIL FROM). The variants below marked for phase 2 feed them to
 * the MX over SMTP and check `tls` on stored messages; they run once the MX intake is wired.
 */
import * as fs from "node:fs"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { generatedFiles } from "../../src/smtp/tls.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { createAddress } from "../support/inbound-fixtures.ts"
import { smtpLogin } from "../sandbox/support.ts"
import { startReceiver, verifySignatures, type WebhookReceiver } from "../support/webhook-receiver.ts"
import { fundedAccount, makeOutboundApp, query, send, startRelay, type TestRelay } from "../outbound/support.ts"
import { bounceFixture, feedBounce, sendThroughRelay } from "./support.ts"

const JUMA = "juma.hamisi.8842@gmail.com"
const HALIMA = "halima.omari@yahoo.com"

let relay: TestRelay
let api: TestApp
let receiver: WebhookReceiver
beforeAll(async () => {
  relay = await startRelay()
  receiver = await startReceiver()
  api = await makeOutboundApp({ relayUrl: relay.url, workers: true })
})
afterAll(async () => {
  await Promise.all([api?.stop(), relay?.close(), receiver?.close()])
})

/** What the account sees after both reports, and what its endpoint received. */
const expectBouncedAndComplained = async (account: TestAccount, emailId: number, secret: string) => {
  const d = await api.call("GET", `/api/outbound/emails/${emailId}`, { token: account.apiKey })
  const byEmail = Object.fromEntries(d.body.data.recipients.map((r: { email: string }) => [r.email, r]))
  expect(byEmail[JUMA]).toMatchObject({ status: "sent", feedback: { type: "bounced", smtp_code: "5.1.1" } })
  expect(byEmail[HALIMA]).toMatchObject({ status: "sent", feedback: { type: "complained", smtp_code: null } })

  const suppressions = await api.call("GET", "/api/outbound/suppressions", { token: account.apiKey })
  expect(suppressions.body.data.map((s: { email: string; reason: string }) => [s.email, s.reason]).sort()).toEqual([
    [HALIMA, "complained"],
    [JUMA, "bounced"],
  ])
  const again = await send(api, account, { to: [JUMA, HALIMA], subject: "Tena", text_body: "t" })
  expect(again.status).toBe(400)
  expect(again.body.errors[0].code).toBe("SUPPRESSED")

  const got = await receiver.waitFor(2, 15_000)
  for (const r of got) expect(verifySignatures(r, secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
  const events = got.map((r) => JSON.parse(r.body)).sort((a, b) => a.event.localeCompare(b.event))
  expect(events).toEqual([
    {
      event: "email.bounced",
      email_id: emailId,
      recipient: JUMA,
      status: "bounced",
      smtp_code: "5.1.1",
      diagnostic: expect.stringMatching(/^550-5\.1\.1 The email account that you tried to reach does not exist/),
      timestamp: expect.stringMatching(/Z$/),
    },
    {
      event: "email.complained",
      email_id: emailId,
      recipient: HALIMA,
      status: "complained",
      smtp_code: null,
      diagnostic: "feedback-type: abuse; user-agent: Yahoo!-Mail-Feedback/2.0",
      timestamp: expect.stringMatching(/Z$/),
    },
  ])
}

describe("a bounce and a complaint for one outbound message", () => {
  it("marks, suppresses, refuses the next send and tells the endpoint (reports handed to the Bounces service)", async () => {
    const account = await fundedAccount(api, 100)
    const endpoint = await api.call("POST", "/api/webhook/endpoints", {
      token: account.apiKey,
      body: { url: receiver.url, events: ["email.bounced", "email.complained"] },
    })
    expect(endpoint.status).toBe(201)
    const sent = await sendThroughRelay(api, relay, account, [JUMA, HALIMA])
    expect(await feedBounce(api, sent.returnPaths.get(JUMA)!, bounceFixture("gmail-dsn-5.1.1.eml"))).toMatchObject({ _tag: "Recorded" })
    expect(await feedBounce(api, sent.returnPaths.get(HALIMA)!, bounceFixture("arf-yahoo-abuse.eml"), "feedback@arf.mail.yahoo.com"))
      .toMatchObject({ _tag: "Recorded" })
    await expectBouncedAndComplained(account, sent.id, endpoint.body.data.secret)
    // Free of charge: only the send's two recipients were paid for.
    const [wallet] = await query<{ balance_tzs: number }>(api, "SELECT balance_tzs FROM wallets WHERE user_id = $1", [account.userId])
    expect(Number(wallet!.balance_tzs)).toBe(90)
  })

  // Phase 2 (MX intake wired): the same reports arrive over SMTP at the MX.
  it("the same, with the reports delivered to the MX over SMTP", async () => {
    receiver.requests.length = 0
    const account = await fundedAccount(api, 100)
    const endpoint = await api.call("POST", "/api/webhook/endpoints", {
      token: account.apiKey,
      body: { url: receiver.url, events: ["email.bounced", "email.complained"] },
    })
    const sent = await sendThroughRelay(api, relay, account, [JUMA, HALIMA])
    const mx = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.mx!, secure: false, ignoreTLS: true, name: "mail-sor-f69.google.com" })
    const dsn = await mx.sendMail({ envelope: { from: "", to: [sent.returnPaths.get(JUMA)!] }, raw: bounceFixture("gmail-dsn-5.1.1.eml") })
    expect(dsn.response).toMatch(/^250 /)
    const arf = await mx.sendMail({ envelope: { from: "feedback@arf.mail.yahoo.com", to: [sent.returnPaths.get(HALIMA)!] }, raw: bounceFixture("arf-yahoo-abuse.eml") })
    expect(arf.response).toMatch(/^250 /)
    // A forged tag is refused at RCPT with 550 5.1.1.
    const forged = sent.returnPaths.get(JUMA)!.replace(/\.([0-9a-f])([0-9a-f]{9})@/, (_m, a: string, rest: string) => `.${a === "0" ? "1" : "0"}${rest}@`)
    await expect(mx.sendMail({ envelope: { from: "", to: [forged] }, raw: bounceFixture("gmail-dsn-5.1.1.eml") })).rejects.toThrow(/550 5\.1\.1/)
    await expectBouncedAndComplained(account, sent.id, endpoint.body.data.secret)
  })

  // Phase 2 (ingest and sandbox record `tls`): a TLS session stores {protocol, cipher}, a plaintext one null.
  it("stores tls on inbound and captured messages, and says ESMTPS in the Received line", async () => {
    const ca = fs.readFileSync(generatedFiles(api.settings.dataDir, api.settings.mxHost).cert, "utf8")
    const tlsOptions = { ca, servername: api.settings.mxHost }
    const owner = await createAccount(api)
    const addressId = await createAddress(api, owner.userId, "tls-e2e")
    await api.run(Billing.use((b) => b.credit({ userId: owner.userId, amount: 100, kind: "credit", reference: { type: "test" } })))
    const overTls = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.mx!, secure: false, requireTLS: true, tls: tlsOptions })
    const plain = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.mx!, secure: false, ignoreTLS: true })
    await overTls.sendMail({ from: "a@sender.example", to: "tls-e2e@inbox.localhost", subject: "tls", text: "t" })
    await plain.sendMail({ from: "a@sender.example", to: "tls-e2e@inbox.localhost", subject: "plain", text: "t" })
    const list = await api.call("GET", `/api/inbound/messages?address_id=${addressId}`, { token: owner.apiKey })
    const bySubject = Object.fromEntries(list.body.data.map((m: { subject: string; id: number }) => [m.subject, m.id]))
    const secured = (await api.call("GET", `/api/inbound/messages/${bySubject.tls}`, { token: owner.apiKey })).body.data
    expect(secured.tls).toEqual({ protocol: "TLSv1.3", cipher: expect.stringMatching(/^TLS_/) })
    expect(JSON.stringify(secured.headers)).toMatch(/with ESMTPS id/)
    expect((await api.call("GET", `/api/inbound/messages/${bySubject.plain}`, { token: owner.apiKey })).body.data.tls).toBeNull()

    const { username, password } = (await smtpLogin(api, owner.apiKey)) as { username: string; password: string }
    const sandbox = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.sandbox!, secure: false, requireTLS: true, tls: tlsOptions, auth: { user: username, pass: password } })
    const smtps = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.sandbox_smtps!, secure: true, tls: tlsOptions, auth: { user: username, pass: password } })
    await sandbox.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: "starttls", text: "t" })
    await smtps.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: "smtps", text: "t" })
    const captured = (await api.call("GET", "/api/sandbox/messages", { token: owner.apiKey })).body.data as Array<{ id: number }>
    for (const m of captured) {
      const one = (await api.call("GET", `/api/sandbox/messages/${m.id}`, { token: owner.apiKey })).body.data
      expect(one.tls).toEqual({ protocol: "TLSv1.3", cipher: expect.stringMatching(/^TLS_/) })
    }
  })
})
