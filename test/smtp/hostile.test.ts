/**
 * Mail is never refused for its content (DECISIONS.md "Hostile input"): NUL, invalid UTF-8 and
 * control characters in headers, bodies, addresses and authentication results are stored with
 * NUL dropped and invalid bytes as U+FFFD in text and JSON columns, while the raw MIME keeps the
 * exact bytes. A 4xx for content would have the sender retry a poison message for days.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, dataBlock, transaction } from "../support/smtp-client.ts"
import { createAddress, fund, type InboundTestApp, query, startInboundApp } from "../support/inbound.ts"
import { plain } from "../sandbox/support.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const funded = async () => {
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, 1000)
  const address = await createAddress(app.api, account.apiKey, `hostile-${Math.random().toString(16).slice(2, 8)}`)
  return { ...account, address }
}

const latin1 = (s: string) => Buffer.from(s, "latin1")

/** The stored raw MIME of a message, as bytes. */
const rawOf = async (messageId: number) => {
  const [row] = await query<{ raw: string }>(
    app.api,
    "SELECT encode(m.raw, 'base64') AS raw FROM inbound_mime m JOIN inbound_messages x ON x.mime_id = m.id WHERE x.id = $1",
    [messageId],
  )
  return Buffer.from(row!.raw, "base64")
}

const hasNoNul = (v: unknown) => expect(JSON.stringify(v)).not.toContain("\\u0000")

describe("the MX never refuses mail for its content", () => {
  it("stores a DKIM-Signature with d=exa\\0mple.com (it used to answer 451 on every try)", async () => {
    const { address, apiKey } = await funded()
    const raw = Buffer.concat([
      latin1("DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=exa"),
      Buffer.from([0]),
      latin1(
        `mple.com; s=mail; h=from:subject; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AAAA\r\nFrom: a@sender.example\r\nTo: ${address.email}\r\nSubject: poison\r\n\r\nbody\r\n`,
      ),
    ])
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO poison.example.net")
    const sent = await transaction(smtp, { from: "a@sender.example", to: [address.email], raw })
    smtp.destroy()
    expect(sent.data?.code, sent.data?.text).toBe(250)
    const id = Number(/stored as (\d+)/.exec(sent.data!.text)![1])
    const one = await app.api.call("GET", `/api/inbound/messages/${id}`, { token: apiKey })
    expect(one.status).toBe(200)
    hasNoNul(one.body.data)
    expect(one.body.data.headers["dkim-signature"]).toContain("d=example.com")
    expect(JSON.stringify(one.body.data.auth_results)).toContain("example.com")
    // The raw MIME keeps the NUL exactly where it was.
    const stored = await rawOf(id)
    expect(stored.subarray(stored.length - raw.length).equals(raw)).toBe(true)
  })

  it("stores NUL, control characters and invalid UTF-8 in headers, body and envelope; raw MIME byte for byte", async () => {
    const { address, apiKey } = await funded()
    const [local, domain] = address.email.split("@")
    const raw = Buffer.concat([
      latin1("From: =?utf-8?B?"),
      latin1(Buffer.from("Asha \u0000 Mwinyi").toString("base64")),
      latin1("?= <asha@sender.example>\r\n"),
      latin1(`To: ${address.email}\r\n`),
      latin1("Subject: caf\xe9 \x01\x02 \xff\xfe"),
      Buffer.from([0]),
      latin1(" end\r\n"),
      latin1("X-Weird\x7f: value \x1b[31m red\r\n"),
      latin1("Message-ID: <nul"),
      Buffer.from([0]),
      latin1("@sender.example>\r\n"),
      latin1("Content-Type: text/plain; charset=utf-8\r\n\r\n"),
      latin1("body with NUL "),
      Buffer.from([0]),
      latin1(" and bad UTF-8 \xc3\x28 and a lone \xed\xa0\x80 surrogate\r\n"),
    ])
    const smtp = await connectSmtp(app.mx)
    // Raw bytes on the command lines too: invalid UTF-8 (control characters in an address are a
    // syntax error smtp-server answers 501, a permanent refusal).
    const say = (line: string) => (smtp.write(latin1(`${line}\r\n`)), smtp.reply())
    await say("EHLO odd.example.net")
    expect((await say("MAIL FROM:<a\x01@sender.example>")).code).toBe(501)
    expect((await say("MAIL FROM:<a\xff@sender.example>")).code).toBe(250)
    const rcpt = await say(`RCPT TO:<${local}+\xe9@${domain}>`)
    expect(rcpt.code, rcpt.text).toBe(250)
    expect((await say("DATA")).code).toBe(354)
    smtp.write(dataBlock(raw))
    const sent = { data: await smtp.reply() }
    smtp.destroy()
    expect(sent.data?.code, sent.data?.text).toBe(250)
    const id = Number(/stored as (\d+)/.exec(sent.data!.text)![1])
    const one = await app.api.call("GET", `/api/inbound/messages/${id}`, { token: apiKey })
    expect(one.status).toBe(200)
    const m = one.body.data
    hasNoNul(m)
    expect(m.subject).toContain("caf")
    expect(m.subject).toContain("\ufffd")
    expect(m.subject).toContain("end")
    expect(m.text_body).toContain("body with NUL  and bad UTF-8 \ufffd(")
    expect(m.from_addr).toContain("asha@sender.example")
    expect(m.to_addr).toBe(`${local}+\ufffd@${domain}`)
    const [row] = await query<{ envelope_from: string; message_id: string }>(
      app.api,
      "SELECT envelope_from, message_id FROM inbound_messages WHERE id = $1",
      [id],
    )
    expect(row!.envelope_from).toBe("a\ufffd@sender.example")
    expect(row!.message_id).toBe("<nul@sender.example>")
    const stored = await rawOf(id)
    expect(stored.subarray(stored.length - raw.length).equals(raw)).toBe(true)
  })
})

/** Mail mailsplit refuses to split: more MIME parts than its 1,000. */
const manyParts = (to: string) => {
  const parts = Array.from({ length: 1_001 }, (_, i) => `--b\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join("")
  return Buffer.from(
    `From: =?utf-8?B?${Buffer.from("Asha Mwinyi").toString("base64")}?= <asha@sender.example>\r\nTo: ${to}\r\n` +
      `Subject: =?utf-8?Q?many_parts_=E2=9C=93?=\r\nMessage-ID: <many@sender.example>\r\n` +
      `Content-Type: multipart/mixed; boundary=b\r\n\r\n${parts}--b--\r\n`,
  )
}

/** Mail whose header block is over mailsplit's 1 MiB (so over the spool threshold too: read from a file). */
const hugeHeader = (to: string) => {
  const filler = Array.from({ length: 15_000 }, () => ` ${"x".repeat(76)}`).join("\r\n")
  return Buffer.from(
    `From: asha@sender.example\r\nTo: ${to}\r\nSubject: huge header\r\nX-Filler:${filler}\r\n\r\nbody\r\n`,
  )
}

describe("the MX stores mail its MIME parser gives up on", () => {
  const stored = async (raw: Buffer, to: { address: { email: string }; apiKey: string; userId: number }) => {
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO many.example.net")
    const sent = await transaction(smtp, { from: "asha@sender.example", to: [to.address.email], raw })
    smtp.destroy()
    expect(sent.data?.code, sent.data?.text).toBe(250)
    const id = Number(/stored as (\d+)/.exec(sent.data!.text)![1])
    const one = await app.api.call("GET", `/api/inbound/messages/${id}`, { token: to.apiKey })
    expect(one.status).toBe(200)
    // As the API serves it (a large body is kept as a file, not in the MIME row).
    const eml = await fetch(`${app.api.url}/api/inbound/messages/${id}/raw`, { headers: { authorization: `Bearer ${to.apiKey}` } })
    const kept = Buffer.from(await eml.arrayBuffer())
    expect(kept.subarray(kept.length - raw.length).equals(raw)).toBe(true)
    const balance = await app.api.call("GET", "/api/billing/balance", { token: to.apiKey })
    expect(balance.body.data.balance_tzs).toBe(995)
    return one.body.data
  }

  it("over 1,000 MIME parts: its root headers, no bodies, the raw whole, charged once", async () => {
    const to = await funded()
    const m = await stored(manyParts(to.address.email), to)
    expect(m.subject).toBe("many parts \u2713")
    expect(m.from_addr).toBe("Asha Mwinyi <asha@sender.example>")
    expect(m.headers["message-id"]).toBe("<many@sender.example>")
    expect(m.headers["received"]).toBeDefined()
    expect([m.text_body, m.html_body, m.attachments]).toEqual(["", "", []])
  })

  it("a header block over 1 MiB, spooled: the headers it can read in 64 KiB", async () => {
    const to = await funded()
    const m = await stored(hugeHeader(to.address.email), to)
    expect(m.subject).toBe("huge header")
    expect(m.from_addr).toBe("asha@sender.example")
    // Cut at its last whole line within the 64 KiB read; the raw MIME has all of it.
    expect(m.headers["x-filler"].length).toBeGreaterThan(60_000)
    expect(m.headers["x-filler"].length).toBeLessThan(64 * 1024)
    expect(m.text_body).toBe("")
  })
})

describe("the sandbox never refuses mail for its content", () => {
  it("captures mail of over 1,000 MIME parts with its root headers", async () => {
    const { apiKey } = await createAccount(app.api)
    const login = (await app.api.call("GET", "/api/sandbox/credentials/smtp", { token: apiKey })).body.data
    const smtp = await connectSmtp(app.api.ports.sandbox!)
    await smtp.command("EHLO app.example.net")
    expect((await smtp.command(`AUTH PLAIN ${plain(login.username, login.password)}`)).code).toBe(235)
    const sent = await transaction(smtp, { from: "app@app.example", to: ["one@example.com"], raw: manyParts("one@example.com") })
    smtp.destroy()
    expect(sent.data?.code, sent.data?.text).toBe(250)
    const id = Number(/captured as (\d+)/.exec(sent.data!.text)![1])
    const one = await app.api.call("GET", `/api/sandbox/messages/${id}`, { token: apiKey })
    expect(one.status).toBe(200)
    expect(one.body.data.subject).toBe("many parts \u2713")
    expect(one.body.data.text_body).toBe("")
  })

  it("captures NUL, control characters and invalid UTF-8 in headers, body and envelope; raw byte for byte", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const login = (await app.api.call("GET", "/api/sandbox/credentials/smtp", { token: apiKey })).body.data
    const raw = Buffer.concat([
      latin1("Subject: \xff\xfe junk "),
      Buffer.from([0]),
      latin1(" \x01\r\nDKIM-Signature: v=1; d=exa"),
      Buffer.from([0]),
      latin1("mple.com; s=x; b=AA\r\n\r\nbody "),
      Buffer.from([0]),
      latin1(" \xc3\x28\r\n"),
    ])
    const smtp = await connectSmtp(app.api.ports.sandbox!)
    await smtp.command("EHLO app.example.net")
    expect((await smtp.command(`AUTH PLAIN ${plain(login.username, login.password)}`)).code).toBe(235)
    const say = (line: string) => (smtp.write(latin1(`${line}\r\n`)), smtp.reply())
    expect((await say("MAIL FROM:<app\xff@app.example>")).code).toBe(250)
    expect((await say("RCPT TO:<one@example.com>")).code).toBe(250)
    expect((await say("RCPT TO:<two+\x01@example.com>")).code).toBe(501)
    expect((await say("RCPT TO:<two+\xe9@example.com>")).code).toBe(250)
    expect((await say("DATA")).code).toBe(354)
    smtp.write(dataBlock(raw))
    const sent = { data: await smtp.reply() }
    smtp.destroy()
    expect(sent.data?.code, sent.data?.text).toBe(250)
    const id = Number(/captured as (\d+)/.exec(sent.data!.text)![1])
    const one = await app.api.call("GET", `/api/sandbox/messages/${id}`, { token: apiKey })
    expect(one.status).toBe(200)
    hasNoNul(one.body.data)
    expect(one.body.data.recipients).toEqual(["one@example.com", "two+\ufffd@example.com"])
    expect(one.body.data.subject).toContain("junk")
    const [row] = await query<{ raw: string }>(app.api, "SELECT encode(raw, 'base64') AS raw FROM sandbox_messages WHERE user_id = $1", [userId])
    expect(Buffer.from(row!.raw, "base64").equals(raw)).toBe(true)
  })
})
