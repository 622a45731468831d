/** The sandbox capture server over real sockets: nodemailer as an app under development, raw sockets as rude clients. */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, dataBlock, throwJunk, transaction } from "../support/smtp-client.ts"
import { plainMessage } from "../support/inbound.ts"
import {
  capturedCount,
  capturedId,
  createCredential,
  plain,
  query,
  type SandboxTestApp,
  signedIn,
  smtpLogin,
  startSandboxApp,
  transport,
} from "./support.ts"

let app: SandboxTestApp
beforeAll(async () => {
  app = await startSandboxApp()
})
afterAll(() => app.stop())

const corpus = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../fixtures/mail/mail-gem")
const get = (p: string, token: string) => app.api.call("GET", p, { token })

describe("capturing with a real client (nodemailer)", () => {
  it("captures multipart mail with attachments for the SMTP login's account, free at a zero balance", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const login = await smtpLogin(app.api, apiKey)
    const pdf = randomBytes(3000)
    const png = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489", "hex")
    const info = await transport(login.port, login.username, login.password!).sendMail({
      from: "Duka la Asha <orders@duka.example>",
      to: ["mteja@customer.example", "Second <second@other.example>"],
      cc: "copy@cc.example",
      bcc: "hidden@bcc.example",
      subject: "Ankara #42 — TZS 15,000 ✓",
      text: "Asante kwa oda yako.",
      html: '<p>Asante kwa <b>oda</b> yako.</p><img src="cid:logo@duka">',
      attachments: [
        { filename: "ankara 42.pdf", content: pdf, contentType: "application/pdf" },
        { filename: "logo.png", content: png, cid: "logo@duka", contentType: "image/png" },
      ],
    })
    expect(info.accepted).toHaveLength(4)
    expect(info.response).toMatch(/^250 2\.0\.0 OK: captured as \d+$/)
    const id = capturedId(info.response)

    // Free: the wallet was empty and stays untouched, no ledger entry.
    expect(await app.api.run(Billing.use((b) => b.balance(userId)))).toBe(0)
    const [ledger] = await query<{ n: number }>(app.api, "SELECT count(*)::int AS n FROM ledger_entries WHERE user_id = $1", [userId])
    expect(ledger!.n).toBe(0)

    const list = await get("/api/sandbox/messages", apiKey)
    expect(list.status).toBe(200)
    expect(list.body.pagination).toEqual({ page: 1, per_page: 20, total: 1, total_pages: 1 })
    const [summary] = list.body.data
    expect(Object.keys(summary).sort()).toEqual(
      ["attachments", "from_addr", "headers", "html_body", "id", "received_at", "recipients", "size", "subject", "text_body", "tls", "to_addr"],
    )
    expect(summary.tls).toBeNull()
    expect(summary).toMatchObject({
      id,
      from_addr: "Duka la Asha <orders@duka.example>",
      to_addr: "mteja@customer.example",
      recipients: ["mteja@customer.example", "second@other.example", "copy@cc.example", "hidden@bcc.example"],
      subject: "Ankara #42 — TZS 15,000 ✓",
    })
    expect(summary.text_body.trim()).toBe("Asante kwa oda yako.")
    expect(summary.html_body).toContain('src="cid:logo@duka"')
    expect(summary.headers["message-id"]).toBe(info.messageId)
    expect(summary.headers.bcc).toBeUndefined()
    expect(summary.size).toBeGreaterThan(4000)
    expect(Date.parse(summary.received_at)).toBeGreaterThan(Date.now() - 60_000)
    const byName = <T extends { filename: string }>(l: Array<T>) => [...l].sort((a, b) => a.filename.localeCompare(b.filename))
    expect(byName(summary.attachments)).toEqual([
      { filename: "ankara 42.pdf", content_type: "application/pdf", size: 3000, content_id: null },
      { filename: "logo.png", content_type: "image/png", size: png.length, content_id: "logo@duka" },
    ])

    const one = await get(`/api/sandbox/messages/${id}`, apiKey)
    expect(one.status).toBe(200)
    const [gotPdf, gotPng] = byName(one.body.data.attachments as Array<{ filename: string; content: string }>)
    expect(Buffer.from(gotPdf!.content, "base64").equals(pdf)).toBe(true)
    expect(Buffer.from(gotPng!.content, "base64").equals(png)).toBe(true)

    const raw = await get(`/api/sandbox/messages/${id}/raw`, apiKey)
    expect(raw.status).toBe(200)
    expect(raw.headers.get("content-type")).toBe("message/rfc822")
    expect(String(raw.body)).toContain(`Message-ID: ${info.messageId}`)
    expect(Buffer.byteLength(String(raw.body))).toBe(summary.size)
  })

  it("signs in with AUTH LOGIN too, and with a credential (client_id/client_secret); each account sees only its own captures", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const credential = await createCredential(app.api, a.apiKey, { scopes: "smtp" })
    const loginB = await smtpLogin(app.api, b.apiKey)
    const viaLogin = await transport(app.port, credential.client_id, credential.client_secret, { authMethod: "LOGIN" })
      .sendMail({ from: "app@a.example", to: "x@y.example", subject: "via LOGIN", text: "1" })
    expect(viaLogin.response).toMatch(/captured as/)
    await transport(app.port, loginB.username, loginB.password!).sendMail({ from: "app@b.example", to: "z@y.example", subject: "B's", text: "2" })
    const listA = await get("/api/sandbox/messages", a.apiKey)
    expect(listA.body.data.map((m: { subject: string }) => m.subject)).toEqual(["via LOGIN"])
    const listB = await get("/api/sandbox/messages", b.apiKey)
    expect(listB.body.data.map((m: { subject: string }) => m.subject)).toEqual(["B's"])
    const [row] = await query<{ credential_id: number }>(app.api, "SELECT credential_id FROM sandbox_messages WHERE id = $1", [
      capturedId(viaLogin.response),
    ])
    expect(row!.credential_id).toBe(credential.id)
  })

  it("decodes non-UTF-8 mail with the MX's parser (Shift_JIS)", async () => {
    const { apiKey } = await createAccount(app.api)
    const login = await smtpLogin(app.api, apiKey)
    const smtp = await signedIn(app.port, login.username, login.password!)
    const raw = fs.readFileSync(path.join(corpus, "multi_charset/japanese_shift_jis.eml"))
    const sent = await transaction(smtp, { from: "jp@sender.example", to: ["dev@app.example"], raw })
    expect(sent.data?.code).toBe(250)
    smtp.destroy()
    const one = await get(`/api/sandbox/messages/${capturedId(sent.data!.text)}`, apiKey)
    expect(one.body.data.text_body).toContain("あいうえお")
  })
})

describe("the SMTP conversation", () => {
  it("advertises AUTH PLAIN LOGIN, SIZE and STARTTLS, and requires AUTH before MAIL (530)", async () => {
    const smtp = await connectSmtp(app.port)
    expect(smtp.greeting?.code).toBe(220)
    const ehlo = await smtp.command("EHLO app.example.net")
    const features = ehlo.lines.map((l) => l.slice(4))
    expect(features).toContain("AUTH PLAIN LOGIN")
    expect(features).toContain(`SIZE ${app.api.settings.maxMessageBytes}`)
    // DECISIONS.md "TLS on the SMTP servers"; AUTH is offered before STARTTLS too (SPEC.md's clients).
    expect(features).toContain("STARTTLS")
    for (const command of ["MAIL FROM:<a@app.example>", "RCPT TO:<b@app.example>", "DATA"]) {
      const r = await smtp.command(command)
      expect([r.code, r.text], command).toEqual([530, "5.7.0 Authentication required"])
    }
    smtp.destroy()
  })

  it("wrong secrets get 535 5.7.8 and the fifth failure drops the connection with 421", async () => {
    const { apiKey } = await createAccount(app.api)
    const login = await smtpLogin(app.api, apiKey)
    const smtp = await connectSmtp(app.port)
    await smtp.command("EHLO brute.example.net")
    const codes: Array<string> = []
    for (let i = 0; i < 10; i++) {
      const r = await smtp.command(`AUTH PLAIN ${plain(login.username, `guess-${i}`)}`).catch(() => undefined)
      if (!r) break
      codes.push(`${r.code} ${r.text.slice(0, 5)}`)
    }
    await smtp.closed
    expect(codes).toEqual(["535 5.7.8", "535 5.7.8", "535 5.7.8", "535 5.7.8", "421 4.7.0"])
    // Unknown names and malformed input fail the same way; the right secret still works elsewhere.
    const other = await connectSmtp(app.port)
    await other.command("EHLO app.example.net")
    expect((await other.command(`AUTH PLAIN ${plain("sbu_0000000000000000", "x")}`)).code).toBe(535)
    expect((await other.command(`AUTH PLAIN ${plain("x".repeat(5000), "x")}`)).code).toBe(535)
    expect((await other.command("AUTH PLAIN !!!notbase64")).code).toBe(501)
    expect((await other.command("AUTH CRAM-MD5")).code).toBe(504)
    expect((await other.command(`AUTH PLAIN ${plain(login.username, login.password!)}`)).code).toBe(235)
    other.destroy()
  })

  it("AUTH LOGIN step by step on a raw socket", async () => {
    const { apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const smtp = await connectSmtp(app.port)
    await smtp.command("EHLO app.example.net")
    expect((await smtp.command("AUTH LOGIN")).code).toBe(334)
    expect((await smtp.command(Buffer.from(c.client_id).toString("base64"))).code).toBe(334)
    expect((await smtp.command(Buffer.from(c.client_secret).toString("base64"))).code).toBe(235)
    expect((await smtp.command("MAIL FROM:<>")).code).toBe(250)
    smtp.destroy()
  })

  it("an smtp:verify credential signs in but cannot submit (550 5.7.1)", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey, { scopes: "smtp:verify" })
    await transport(app.port, c.client_id, c.client_secret).verify()
    const smtp = await signedIn(app.port, c.client_id, c.client_secret)
    const mail = await smtp.command("MAIL FROM:<a@app.example>")
    expect([mail.code, mail.text.slice(0, 5)]).toEqual([550, "5.7.1"])
    smtp.destroy()
    expect(await capturedCount(app.api, userId)).toBe(0)
  })

  it("a disabled account cannot sign in", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    await query(app.api, "UPDATE users SET disabled_at = now() WHERE id = $1", [userId])
    const smtp = await connectSmtp(app.port)
    await smtp.command("EHLO app.example.net")
    const r = await smtp.command(`AUTH PLAIN ${plain(c.client_id, c.client_secret)}`)
    expect([r.code, r.text]).toEqual([535, "5.7.8 This account is disabled"])
    smtp.destroy()
  })

  it("takes any recipients, caps them at 100 per message (452 beyond), and captures several messages on one connection", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const smtp = await signedIn(app.port, c.client_id, c.client_secret)
    const commands = ["MAIL FROM:<bulk@app.example>", ...Array.from({ length: 120 }, (_, i) => `RCPT TO:<user${i}@anywhere${i % 7}.example>`)]
    smtp.write(commands.map((x) => `${x}\r\n`).join(""))
    const replies = (await smtp.replies(commands.length)).map((r) => r.code)
    expect(replies.slice(0, 101).every((x) => x === 250)).toBe(true)
    expect(replies.slice(101).every((x) => x === 452)).toBe(true)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(dataBlock(plainMessage({ subject: "bulk" })))
    const first = await smtp.reply()
    expect(first.code).toBe(250)
    const second = await transaction(smtp, { from: "", to: ["bounce@app.example"], raw: plainMessage({ subject: "second" }) })
    expect(second.data?.code).toBe(250)
    smtp.destroy()
    expect(await capturedCount(app.api, userId)).toBe(2)
    const one = await get(`/api/sandbox/messages/${capturedId(first.text)}`, apiKey)
    expect(one.body.data.recipients).toHaveLength(100)
    expect(one.body.data.to_addr).toBe("user0@anywhere0.example")
  })

  it("answers an oversized message with 552 and captures nothing; the session goes on", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const smtp = await signedIn(app.port, c.client_id, c.client_secret)
    expect((await smtp.command(`MAIL FROM:<a@app.example> SIZE=${app.api.settings.maxMessageBytes + 1}`)).code).toBe(552)
    expect((await smtp.command("MAIL FROM:<big@app.example>")).code).toBe(250)
    expect((await smtp.command("RCPT TO:<x@app.example>")).code).toBe(250)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write("From: big@app.example\r\nSubject: big\r\n\r\n")
    const chunk = Buffer.from(`${"A".repeat(998)}\r\n`.repeat(1024)) // ~1 MB
    for (let i = 0; i < 26; i++) smtp.write(chunk)
    smtp.write(".\r\n")
    expect((await smtp.reply()).code).toBe(552)
    expect((await smtp.command("NOOP")).code).toBe(250)
    smtp.destroy()
    expect(await capturedCount(app.api, userId)).toBe(0)
  })

  it("captures nothing when the client disconnects in the middle of DATA", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const smtp = await signedIn(app.port, c.client_id, c.client_secret)
    await smtp.command("MAIL FROM:<cut@app.example>")
    await smtp.command("RCPT TO:<x@app.example>")
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(`From: cut@app.example\r\nSubject: half\r\n\r\n${"half a message\r\n".repeat(5000)}`)
    smtp.destroy()
    await smtp.closed
    const sent = await transport(app.port, c.client_id, c.client_secret).sendMail({ from: "a@app.example", to: "x@app.example", subject: "whole", text: "." })
    expect(sent.response).toMatch(/captured/)
    expect(await capturedCount(app.api, userId)).toBe(1)
    const [usage] = await query<{ captured: number }>(app.api, "SELECT captured FROM sandbox_usage WHERE user_id = $1", [userId])
    expect(usage!.captured).toBe(1)
  })

  it("survives junk: binary garbage, unknown commands, an HTTP request, talking before the greeting", async () => {
    expect(await throwJunk(app.port)).toEqual({ junk: 421, http: 421 })
    const early = await connectSmtp(app.port, { waitGreeting: false })
    early.write(`EHLO early.example.net\r\nAUTH PLAIN ${plain("a", "b")}\r\n`)
    expect((await early.reply()).code).toBe(421)
    await early.closed
    // Still serving the next client.
    const { userId, apiKey } = await createAccount(app.api)
    const login = await smtpLogin(app.api, apiKey)
    await transport(app.port, login.username, login.password!).sendMail({ from: "a@app.example", to: "b@app.example", subject: "after junk", text: "ok" })
    expect(await capturedCount(app.api, userId)).toBe(1)
  })
})
