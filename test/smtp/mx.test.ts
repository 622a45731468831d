/** The MX server over real sockets: nodemailer as a well-behaved sender, a raw socket as a rude one. */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, dataBlock, sendRaw, throwJunk, transaction } from "../support/smtp-client.ts"
import { balance, countMessages, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}`

const fundedAddress = async (amount = 1000) => {
  const account = await createAccount(app.api)
  if (amount > 0) await fund(app.api, account.userId, amount)
  const address = await createAddress(app.api, account.apiKey, unique("info"))
  return { ...account, address }
}

describe("MX with a real client (nodemailer)", () => {
  it("stores multipart mail with attachments and an inline image, records SPF/DKIM/DMARC, keeps the raw MIME", async () => {
    const { userId, apiKey, address } = await fundedAddress()
    const second = await createAddress(app.api, apiKey, unique("sales"))
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 1024 })
    const p = publicKey.export({ type: "spki", format: "der" }).toString("base64")
    app.dns.set("mail._domainkey.sender.example", "TXT", [`v=DKIM1; k=rsa; p=${p}`])
    const pdf = randomBytes(3000)
    const png = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489", "hex")

    const info = await nodemailer.createTransport({
      host: "127.0.0.1",
      port: app.mx,
      secure: false,
      ignoreTLS: true,
      name: "client.sender.example",
      dkim: { domainName: "sender.example", keySelector: "mail", privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString() },
    }).sendMail({
      from: "Asha Mwinyi <asha@sender.example>",
      to: [address.email.replace(/^[a-z]/, (c) => c.toUpperCase()), second.email, `nobody-${address.local_part}@inbox.localhost`],
      subject: "Ankara ya Novemba — €100 ✓",
      text: "Habari, angalia ankara.",
      html: '<p>Habari, angalia <b>ankara</b>.</p><img src="cid:logo@sender">',
      attachments: [
        { filename: "ankara ya novemba.pdf", content: pdf, contentType: "application/pdf" },
        { filename: "logo.png", content: png, cid: "logo@sender", contentType: "image/png" },
      ],
    })
    expect(info.accepted).toHaveLength(2)
    expect(info.rejected).toHaveLength(1)
    expect(info.response).toMatch(/^250 /)
    expect(await balance(app.api, userId)).toBe(990)

    const list = await app.api.call("GET", `/api/inbound/messages?address_id=${address.id}`, { token: apiKey })
    expect(list.status).toBe(200)
    expect(list.body.pagination).toEqual({ page: 1, per_page: 20, total: 1, total_pages: 1 })
    const [summary] = list.body.data
    expect(Object.keys(summary).sort()).toEqual(
      ["address_id", "attachments", "from_addr", "headers", "html_body", "id", "is_read", "received_at", "subject", "text_body", "tls", "to_addr"],
    )
    expect(summary.tls).toBeNull()
    expect(summary).toMatchObject({
      address_id: address.id,
      from_addr: "Asha Mwinyi <asha@sender.example>",
      subject: "Ankara ya Novemba — €100 ✓",
      is_read: false,
    })
    expect(summary.to_addr.toLowerCase()).toBe(address.email)
    expect(summary.text_body.trim()).toBe("Habari, angalia ankara.")
    expect(summary.html_body).toContain('src="cid:logo@sender"')
    expect(summary.headers["message-id"]).toBe(info.messageId)
    expect(summary.headers["dkim-signature"]).toContain("d=sender.example")
    const byName = <T extends { filename: string }>(list: Array<T>) => [...list].sort((a, b) => a.filename.localeCompare(b.filename))
    expect(byName(summary.attachments)).toEqual([
      { filename: "ankara ya novemba.pdf", content_type: "application/pdf", size: 3000, content_id: null },
      { filename: "logo.png", content_type: "image/png", size: png.length, content_id: "logo@sender" },
    ])

    const one = await app.api.call("GET", `/api/inbound/messages/${summary.id}`, { token: apiKey })
    expect(one.status).toBe(200)
    const [gotPdf, gotPng] = byName(one.body.data.attachments as Array<{ filename: string; content: string }>)
    expect(Buffer.from(gotPdf!.content, "base64").equals(pdf)).toBe(true)
    expect(Buffer.from(gotPng!.content, "base64").equals(png)).toBe(true)
    expect(one.body.data.auth_results).toMatchObject({
      spf: "pass",
      dmarc: "pass",
      dkim: [{ domain: "sender.example", selector: "mail", result: "pass" }],
    })

    const raw = await app.api.call("GET", `/api/inbound/messages/${summary.id}/raw`, { token: apiKey })
    expect(raw.status).toBe(200)
    expect(raw.headers.get("content-type")).toBe("message/rfc822")
    const text = String(raw.body)
    expect(text).toMatch(/^Received-SPF: pass|^Authentication-Results: /)
    expect(text).toMatch(/Received: from client\.sender\.example \(\[127\.0\.0\.1\]\)\r\n\tby mx\.inbox\.localhost/)
    expect(text).toContain(`Message-ID: ${info.messageId}`)
  })

  it("advertises SIZE, PIPELINING and STARTTLS, no AUTH, and refuses a declared oversize at MAIL FROM", async () => {
    const smtp = await connectSmtp(app.mx)
    expect(smtp.greeting?.code).toBe(220)
    const ehlo = await smtp.command("EHLO client.example.net")
    expect(ehlo.code).toBe(250)
    const features = ehlo.lines.map((l) => l.slice(4))
    expect(features).toContain(`SIZE ${app.api.settings.maxMessageBytes}`)
    expect(features).toContain("PIPELINING")
    expect(features.some((f) => /^AUTH/.test(f))).toBe(false)
    // DECISIONS.md "TLS on the SMTP servers": outside production a generated certificate is served.
    expect(features).toContain("STARTTLS")
    const mail = await smtp.command(`MAIL FROM:<a@sender.example> SIZE=${app.api.settings.maxMessageBytes + 1}`)
    expect(mail.code).toBe(552)
    expect((await smtp.command("QUIT")).code).toBe(221)
    smtp.destroy()
  })
})

describe("MX with a rude client (raw socket)", () => {
  it("answers a 30 MB message with 552 and stores and charges nothing", async () => {
    const { userId, address } = await fundedAddress(100)
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO big.example.net")
    expect((await smtp.command("MAIL FROM:<big@sender.example>")).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${address.email}>`)).code).toBe(250)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(`From: big@sender.example\r\nTo: ${address.email}\r\nSubject: big\r\n\r\n`)
    const line = `${"A".repeat(998)}\r\n`
    const chunk = Buffer.from(line.repeat(1024)) // ~1 MB
    for (let i = 0; i < 30; i++) smtp.write(chunk)
    smtp.write(".\r\n")
    const r = await smtp.reply()
    expect(r.code).toBe(552)
    // The session survives and can go on.
    expect((await smtp.command("NOOP")).code).toBe(250)
    smtp.destroy()
    expect(await countMessages(app.api, userId)).toBe(0)
    expect(await balance(app.api, userId)).toBe(100)
  })

  it("caps a pipelined flood of 500 RCPTs at 100 recipients (452 beyond) and stores one copy per address", async () => {
    const { userId, address } = await fundedAddress(100)
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO flood.example.net")
    const [local] = address.email.split("@")
    const commands = ["MAIL FROM:<flood@sender.example>", ...Array.from({ length: 500 }, (_, i) => `RCPT TO:<${local}+${i}@inbox.localhost>`)]
    smtp.write(commands.map((c) => `${c}\r\n`).join(""))
    const replies = await smtp.replies(commands.length)
    expect(replies[0]!.code).toBe(250)
    const rcpts = replies.slice(1).map((r) => r.code)
    expect(rcpts.filter((c) => c === 250)).toHaveLength(100)
    expect(rcpts.slice(100).every((c) => c === 452)).toBe(true)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(dataBlock(plainMessage({ to: address.email })))
    expect((await smtp.reply()).code).toBe(250)
    smtp.destroy()
    expect(await countMessages(app.api, userId)).toBe(1)
    expect(await balance(app.api, userId)).toBe(95)
  })

  it("drops a client that floods unknown recipients after 20 rejections", async () => {
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO dict.example.net")
    const commands = ["MAIL FROM:<x@sender.example>", ...Array.from({ length: 500 }, (_, i) => `RCPT TO:<guess${i}@inbox.localhost>`)]
    smtp.write(commands.map((c) => `${c}\r\n`).join(""))
    const replies: Array<number> = []
    for (;;) {
      const r = await smtp.reply().catch(() => undefined)
      if (!r) break
      replies.push(r.code)
    }
    await smtp.closed
    expect(replies[0]).toBe(250)
    expect(replies.slice(1, 20).every((c) => c === 550)).toBe(true)
    expect(replies[20]).toBe(421)
    expect(replies.length).toBeLessThan(30)
  })

  it("refuses a client that talks before the greeting, storing nothing", async () => {
    const { userId, address } = await fundedAddress(100)
    const smtp = await connectSmtp(app.mx, { waitGreeting: false })
    smtp.write(
      `EHLO early.example.net\r\nMAIL FROM:<e@sender.example>\r\nRCPT TO:<${address.email}>\r\nDATA\r\n` +
        dataBlock(plainMessage()).toString("latin1") + "QUIT\r\n",
    )
    const first = await smtp.reply()
    expect(first.code).toBe(421)
    await smtp.closed
    expect(await countMessages(app.api, userId)).toBe(0)
  })

  it("serves a whole transaction pipelined in one write after the greeting", async () => {
    const { userId, address } = await fundedAddress(100)
    const smtp = await connectSmtp(app.mx)
    smtp.write(
      `EHLO pipe.example.net\r\nMAIL FROM:<p@sender.example>\r\nRCPT TO:<${address.email}>\r\nDATA\r\n` +
        dataBlock(plainMessage({ subject: "pipelined" })).toString("latin1") + "QUIT\r\n",
    )
    const codes = (await smtp.replies(6)).map((r) => r.code)
    expect(codes).toEqual([250, 250, 250, 354, 250, 221])
    await smtp.closed
    expect(await countMessages(app.api, userId)).toBe(1)
  })

  it("survives junk: binary garbage, unknown commands and an HTTP request", async () => {
    expect(await throwJunk(app.mx)).toEqual({ junk: 421, http: 421 })
    // The server still works for the next sender.
    const { userId, address } = await fundedAddress(100)
    const sent = await sendRaw(app.mx, { from: "a@sender.example", to: [address.email], raw: plainMessage() })
    expect(sent.data?.code).toBe(250)
    expect(await countMessages(app.api, userId)).toBe(1)
  })

  it("stores and charges nothing when the client disconnects in the middle of DATA", async () => {
    const { userId, address } = await fundedAddress(100)
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO cut.example.net")
    await smtp.command("MAIL FROM:<cut@sender.example>")
    await smtp.command(`RCPT TO:<${address.email}>`)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(`From: cut@sender.example\r\nSubject: half\r\n\r\n${"half a message\r\n".repeat(5000)}`)
    smtp.destroy()
    await smtp.closed
    // A complete message afterwards is the only one stored.
    const sent = await sendRaw(app.mx, { from: "a@sender.example", to: [address.email], raw: plainMessage({ subject: "whole" }) })
    expect(sent.data?.code).toBe(250)
    expect(await countMessages(app.api, userId)).toBe(1)
    expect(await balance(app.api, userId)).toBe(95)
  })

  it("defers with 452 when the wallet cannot pay, and stores nothing", async () => {
    const { userId, address } = await fundedAddress(0)
    const sent = await sendRaw(app.mx, { from: "a@sender.example", to: [address.email], raw: plainMessage() })
    expect(sent.rcpts[0]!.code).toBe(452)
    expect(sent.rcpts[0]!.text).toMatch(/^4\.2\.2 /)
    expect(sent.data).toBeUndefined()
    expect(await countMessages(app.api, userId)).toBe(0)
    await fund(app.api, userId, 5)
    expect((await sendRaw(app.mx, { from: "a@sender.example", to: [address.email], raw: plainMessage() })).data?.code).toBe(250)
    expect(await balance(app.api, userId)).toBe(0)
  })

  it("never overdraws the wallet or deadlocks under concurrent deliveries to overlapping recipients", async () => {
    const { userId, apiKey, address: a } = await fundedAddress(50) // pays for 10 address copies
    const b = await createAddress(app.api, apiKey, unique("b"))
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        sendRaw(app.mx, { from: "a@sender.example", to: i % 2 ? [a.email, b.email] : [b.email, a.email], raw: plainMessage({ subject: `c${i}` }) })
      ),
    )
    // RCPT counts the copies other sessions were promised and have not committed yet: exactly ten
    // recipients get a 250 across the twelve sessions, every other one a 452 (never another code).
    for (const r of results) {
      for (const x of r.rcpts) expect([250, 452]).toContain(x.code)
      if (r.data) expect([250, 452]).toContain(r.data.code)
    }
    const stored = results.filter((r) => r.data?.code === 250).reduce((n, r) => n + r.rcpts.filter((x) => x.code === 250).length, 0)
    expect(stored).toBe(10)
    expect(await countMessages(app.api, userId)).toBe(10)
    expect(await balance(app.api, userId)).toBe(0)
    const [sums] = await query<{ counted: number; ledger: number }>(
      app.api,
      `SELECT (SELECT COALESCE(sum(message_count), 0) FROM inbound_addresses WHERE user_id = $1)::int8 AS counted,
              (SELECT COALESCE(sum(amount_tzs), 0) FROM ledger_entries WHERE user_id = $1)::int8 AS ledger`,
      [userId],
    )
    expect(sums).toEqual({ counted: 10, ledger: 0 })
  })

  it("stores messages with 8-bit junk, no headers at all, and broken MIME", async () => {
    const { userId, apiKey, address } = await fundedAddress(100)
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO odd.example.net")
    const junk = Buffer.concat([Buffer.from("Subject: \xff\xfe caf\xe9\r\nFrom: =?bogus?Q?x?= <\x01@\x02>\r\n\r\n", "latin1"), randomBytes(4000).map((b) => (b === 0x0a || b === 0x0d || b === 0x2e ? 0x41 : b)), Buffer.from("\r\n\u0000nul\r\n", "latin1")])
    const messages = [
      junk,
      Buffer.from("just a body, not a single header\r\n"),
      Buffer.from('Content-Type: multipart/mixed; boundary="never-closed"\r\n\r\n--never-closed\r\nContent-Type: text/plain\r\n\r\npart one\r\n--never-clo'),
      Buffer.from("Content-Type: text/plain; charset=x-unknown-charset\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64!!!\r\n"),
    ]
    for (const raw of messages) {
      const sent = await transaction(smtp, { from: "", to: [address.email], raw })
      expect(sent.data?.code).toBe(250)
    }
    smtp.destroy()
    expect(await countMessages(app.api, userId)).toBe(4)
    const list = await app.api.call("GET", `/api/inbound/messages?address_id=${address.id}&per_page=10`, { token: apiKey })
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(4)
    for (const m of list.body.data) {
      const one = await app.api.call("GET", `/api/inbound/messages/${m.id}`, { token: apiKey })
      expect(one.status).toBe(200)
      expect(typeof one.body.data.text_body).toBe("string")
    }
  })
})
