/**
 * The agent end to end with the real worker loop and real time: mail sent over SMTP to the MX
 * server is stored, queued with the message, answered by the AI (msw) and kept as a draft,
 * listed through the API; a bounce sent over SMTP is skipped.
 */
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { createAddress, fund } from "../support/inbound.ts"
import { dataBlock, connectSmtp } from "../support/smtp-client.ts"
import { makeFakeAi, mailFixture } from "./support.ts"

const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

describe("draft mode over SMTP", () => {
  const ai = makeFakeAi()
  let dns: TestDnsServer
  let app: TestApp
  beforeAll(async () => {
    dns = await startDnsServer(zoneFixture("platform.json"))
    app = await makeTestApp({ settings: { ...ai.settings, dnsServers: [dns.address] }, infrastructure: ai.layer })
  })
  afterAll(async () => {
    await app?.stop()
    await dns?.close()
  })

  it("turns a customer's mail into a stored draft within moments, and skips a bounce", async () => {
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
