/**
 * The agent end to end with the real worker loops and real time: mail sent over SMTP to the MX
 * server is stored, queued with the message and answered by the AI (msw). In draft mode the
 * reply is kept and listed; in auto mode it goes through the real OutboundSender to the local
 * capture transport, threaded and marked auto-replied, and costs 5 TZS. A bounce is skipped.
 */
import { Database } from "../../effects/ports/Database.ts"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { balance, createAddress, fund } from "../support/inbound.ts"
import { dataBlock, connectSmtp } from "../support/smtp-client.ts"
import { makeFakeAi, mailFixture } from "./support.ts"

const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** The whole service with a fake AI gateway and the platform zone on a loopback DNS server, per describe block. */
const agentOverSmtp = () => {
  const env = { ai: makeFakeAi(), dns: undefined as unknown as TestDnsServer, app: undefined as unknown as TestApp }
  beforeAll(async () => {
    env.dns = await startDnsServer(zoneFixture("platform.json"))
    env.app = await makeTestApp({ settings: { ...env.ai.settings, dnsServers: [env.dns.address] }, infrastructure: env.ai.layer })
  })
  afterAll(async () => {
    await env.app?.stop()
    await env.dns?.close()
  })
  return env
}

describe("draft mode over SMTP", () => {
  const env = agentOverSmtp()

  it("turns a customer's mail into a stored draft within moments, and skips a bounce", async () => {
    const { app, ai } = env
    const account = await createAccount(app)
    await fund(app, account.userId, 2_000)
    const address = await createAddress(app, account.apiKey, "e2e-agent")
    const put = await app.call("PUT", `/api/agent/configs/${address.id}`, { token: account.apiKey, body: { mode: "draft" } })
    expect(put.status).toBe(200)

    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: app.ports.mx!, secure: false, ignoreTLS: true })
    const sentAt = Date.now()
    await transport.sendMail({
      from: "Neema <neema@sender.example>",
      to: address.email,
      subject: "Order 7781",
      text: "Has my order left the warehouse in Dar es Salaam?",
      messageId: "<order-7781-q@sender.example>",
    })
    transport.close()

    const [request] = await ai.waitFor(1)
    expect(request!.body.messages.at(-1)!.content).toContain("Has my order left the warehouse in Dar es Salaam?")
    let drafts: { body: { data: Array<Record<string, unknown>> } } | undefined
    await until("draft stored", async () => {
      drafts = await app.call("GET", `/api/agent/drafts?address_id=${address.id}`, { token: account.apiKey })
      return drafts.body.data.length === 1
    })
    console.info(`agent end to end: draft stored +${Date.now() - sentAt} ms after the SMTP send`)
    const messages = await app.call("GET", `/api/inbound/messages?address_id=${address.id}`, { token: account.apiKey })
    expect(drafts!.body.data[0]).toMatchObject({
      message_id: messages.body.data[0].id,
      to_address: "neema@sender.example",
      subject: "Re: Order 7781",
      text_body: expect.stringMatching(/^Habari Neema,/),
    })

    // A bounce (MAIL FROM:<>) over a raw SMTP session: stored and charged like any mail, never answered.
    const smtp = await connectSmtp(app.ports.mx!, { waitGreeting: true })
    expect((await smtp.command("EHLO mx.sender.example")).code).toBe(250)
    expect((await smtp.command("MAIL FROM:<>")).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${address.email}>`)).code).toBe(250)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(dataBlock(mailFixture("mail-gem/multipart_report_emails/report_530.eml")))
    expect((await smtp.reply()).code).toBe(250)
    await smtp.command("QUIT")
    smtp.destroy()
    await until("bounce looked at", async () => {
      const jobs = await app.call("GET", `/api/agent/jobs?address_id=${address.id}`, { token: account.apiKey })
      return jobs.body.data.length === 2 && jobs.body.data[0].status !== "pending"
    })
    const jobs = await app.call("GET", `/api/agent/jobs?address_id=${address.id}`, { token: account.apiKey })
    expect(jobs.body.data.map((j: { status: string; reason: string | null }) => [j.status, j.reason])).toEqual([
      ["skipped", "null sender (a bounce or notification)"],
      ["drafted", null],
    ])
    expect(ai.requests).toHaveLength(1)
  })
})

describe("auto mode over SMTP with the real outbound", () => {
  const env = agentOverSmtp()

  it("sends the reply through outbound (captured locally), threaded and marked, and debits 5 TZS", async () => {
    const { app, ai } = env
    const account = await createAccount(app)
    await fund(app, account.userId, 2_000)
    const address = await createAddress(app, account.apiKey, "e2e-auto")
    const put = await app.call("PUT", `/api/agent/configs/${address.id}`, {
      token: account.apiKey,
      body: { mode: "auto", reply_from_address: "care@inbox.localhost" },
    })
    expect(put.status).toBe(200)

    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: app.ports.mx!, secure: false, ignoreTLS: true })
    await transport.sendMail({
      from: "Neema <neema@sender.example>",
      to: address.email,
      subject: "Order 7781",
      text: "Has my order left the warehouse in Dar es Salaam?",
      messageId: "<order-7781-q@sender.example>",
      references: "<order-7781@duka.example>",
    })
    transport.close()

    let job: Record<string, unknown> | undefined
    await until("reply sent", async () => {
      const jobs = await app.call("GET", `/api/agent/jobs?address_id=${address.id}`, { token: account.apiKey })
      job = jobs.body.data[0]
      return job?.status === "replied"
    })
    expect(ai.requests).toHaveLength(1)

    // Listed as an ordinary outbound message of the account, 5 TZS.
    const sent = await app.call("GET", `/api/outbound/emails/${job!.outbound_message_id}`, { token: account.apiKey })
    expect(sent.status).toBe(200)
    expect(sent.body.data).toMatchObject({
      from_address: "care@inbox.localhost",
      to_addresses: ["neema@sender.example"],
      subject: "Re: Order 7781",
      status: "sent",
      amount_tzs: 5,
    })
    expect(sent.body.data.text_body).toMatch(/^Habari Neema,/)
    // 2000 − 5 for the inbound message − 5 for the reply.
    expect(await balance(app, account.userId)).toBe(1_990)

    const [capture] = await app.run(Database.use((db) =>
      db.query<{ raw: Uint8Array; envelope_to: Array<string> }>("SELECT raw, envelope_to FROM outbound_captures WHERE message_id = $1", [job!.outbound_message_id])
    ))
    expect(capture!.envelope_to).toEqual(["neema@sender.example"])
    const raw = Buffer.from(capture!.raw).toString("utf8")
    expect(raw).toMatch(/^Subject: Re: Order 7781\r$/m)
    expect(raw).toMatch(/^In-Reply-To: <order-7781-q@sender\.example>\r$/m)
    expect(raw).toMatch(/^References: <order-7781@duka\.example> <order-7781-q@sender\.example>\r$/m)
    expect(raw).toMatch(/^Auto-Submitted: auto-replied\r$/m)
    expect(raw).toMatch(/^From: care@inbox\.localhost\r$/m)

    // The reply arriving at an auto-answering mailbox of the platform is not answered back (no loop).
    const other = await createAddress(app, account.apiKey, "e2e-auto-peer")
    await app.call("PUT", `/api/agent/configs/${other.id}`, { token: account.apiKey, body: { mode: "auto" } })
    const back = nodemailer.createTransport({ host: "127.0.0.1", port: app.ports.mx!, secure: false, ignoreTLS: true })
    await back.sendMail({ envelope: { from: "care@inbox.localhost", to: [other.email] }, raw })
    back.close()
    await until("loop checked", async () => {
      const jobs = await app.call("GET", `/api/agent/jobs?address_id=${other.id}`, { token: account.apiKey })
      return jobs.body.data[0]?.status === "skipped"
    })
    const jobs = await app.call("GET", `/api/agent/jobs?address_id=${other.id}`, { token: account.apiKey })
    expect(jobs.body.data[0].reason).toBe("Auto-Submitted: auto-replied")
    expect(ai.requests).toHaveLength(1)
  })
})
