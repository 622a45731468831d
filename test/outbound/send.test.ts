/**
 * POST /api/outbound/emails against a real local SMTP relay: what the relay receives (headers,
 * envelope, Bcc, attachments), the charge, per-recipient refusals (refund, suppression), whole
 * provider failures (connection refused, MAIL FROM / DATA refused, connection dropped: 502 and a
 * full refund), 402 / 403 / SUPPRESSED writing nothing, and the read endpoints.
 */
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { CHUNK_BODY_BYTES, INLINE_BODY_BYTES } from "../../effects/shared/heavy-pages.ts"
import {
  balance,
  closedPort,
  detail,
  expectLedgerConsistent,
  expectNothingWritten,
  fund,
  fundedAccount,
  makeOutboundApp,
  movements,
  query,
  rcpt,
  send,
  startDroppingServer,
  startRelay,
  type TestRelay,
  verp,
} from "./support.ts"

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

describe("a send through the relay", () => {
  it("delivers one message: To/Cc headers with names, Bcc only in the envelope, 5 TZS per recipient", async () => {
    const a = await fundedAccount(api, 100)
    const [to1, to2, cc, bcc] = [rcpt("to"), rcpt("to"), rcpt("cc"), rcpt("bcc")]
    const res = await send(api, a, {
      to: [to1, `Bob Mrema <${to2}>`],
      cc: [`"Neema, Ops" <${cc}>`],
      bcc: [bcc],
      subject: "Habari za leo",
      text_body: "Plain body",
      html_body: "<p>HTML body</p>",
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const m = res.body.data
    expect(Object.keys(m).sort()).toEqual([
      "amount_tzs", "bcc_addresses", "cc_addresses", "created_at", "error_code", "from_address", "html_body", "id",
      "provider_message_id", "status", "subject", "text_body", "to_addresses", "user_id",
    ])
    expect(m).toMatchObject({
      user_id: a.userId,
      from_address: "noreply@inbox.localhost",
      to_addresses: [to1, to2],
      cc_addresses: [cc],
      bcc_addresses: [bcc],
      subject: "Habari za leo",
      status: "sent",
      error_code: null,
      amount_tzs: 20,
    })
    expect(m.provider_message_id).toMatch(/@inbox\.localhost$/)

    // One transaction per recipient, each with its own VERP return path, all carrying the same bytes.
    expect(relay.received).toHaveLength(4)
    const byRecipient = new Map(relay.received.map((r) => [r.to.join(","), r.from]))
    expect(byRecipient).toEqual(new Map([to1, to2, cc, bcc].map((email, i) => [email, verp(api, m.id, i)])))
    expect(new Set(relay.received.map((r) => r.raw)).size).toBe(1)
    const got = relay.received[0]!
    const parsed = await simpleParser(got.raw)
    expect(parsed.subject).toBe("Habari za leo")
    expect(parsed.text?.trim()).toBe("Plain body")
    expect(parsed.html).toContain("<p>HTML body</p>")
    expect(parsed.messageId).toBe(`<${m.provider_message_id}>`)
    const toHeader = parsed.to && !Array.isArray(parsed.to) ? parsed.to.value : []
    expect(toHeader).toEqual([{ address: to1, name: "" }, { address: to2, name: "Bob Mrema" }])
    expect(parsed.cc && !Array.isArray(parsed.cc) ? parsed.cc.value : []).toEqual([{ address: cc, name: "Neema, Ops" }])
    expect(got.raw).not.toContain(bcc)
    expect(parsed.bcc).toBeUndefined()

    expect(await balance(api, a.userId)).toBe(80)
    expect(await movements(api, a.userId)).toEqual([{ kind: "debit", amount_tzs: -20, reference_type: "outbound_message", reference_id: String(m.id) }])
    await expectLedgerConsistent(api)
  })

  it("carries attachments byte for byte", async () => {
    const a = await fundedAccount(api, 100)
    const pdf = Buffer.from("%PDF-1.4 fake pdf \u0000\u0001\u00ff bytes")
    const csv = Buffer.from("a,b\n1,2\n")
    const res = await send(api, a, {
      to: [rcpt()],
      subject: "Invoice",
      text_body: "attached",
      attachments: [
        { filename: "invoice.pdf", content_type: "application/pdf", size: pdf.length, data_base64: pdf.toString("base64") },
        // MIME-style line breaks inside the base64 are accepted.
        { filename: "data.csv", content_type: "text/csv", data_base64: csv.toString("base64").replace(/(.{4})/, "$1\r\n") },
      ],
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const parsed = await simpleParser(relay.received[0]!.raw)
    expect(parsed.attachments.map((x) => [x.filename, x.contentType, x.content.toString("hex")])).toEqual([
      ["invoice.pdf", "application/pdf", pdf.toString("hex")],
      ["data.csv", "text/csv", csv.toString("hex")],
    ])
    // Once the message left, its attachment bytes are not kept.
    const left = await query(api, "SELECT 1 FROM outbound_attachments a JOIN outbound_messages m ON m.content_id = a.content_id WHERE m.id = $1", [res.body.data.id])
    expect(left).toEqual([])
  })

  it("sends duplicates once and charges them once", async () => {
    const a = await fundedAccount(api, 100)
    const x = rcpt()
    const res = await send(api, a, { to: [x, x.toUpperCase()], cc: [x], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data.amount_tzs).toBe(5)
    expect(relay.received[0]!.to).toEqual([x])
    expect(await balance(api, a.userId)).toBe(95)
  })
})

describe("GET /api/outbound/emails", () => {
  it("writes a page of large messages a group at a time, every body whole and in order", async () => {
    const a = await fundedAccount(api, 100)
    // Past the inline size and past one group's budget together (effects/shared/heavy-pages.ts).
    const bodies = ["small", "a".repeat(INLINE_BODY_BYTES + 1), "b".repeat(CHUNK_BODY_BYTES / 2 + 10), "c".repeat(CHUNK_BODY_BYTES / 2 + 10)]
    const ids: Array<number> = []
    for (const [i, text_body] of bodies.entries()) {
      const res = await send(api, a, { to: [rcpt()], subject: `s${i}`, text_body, html_body: i === 1 ? "<p>big</p>" : undefined })
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(201)
      ids.push(res.body.data.id)
    }
    const page = await api.call("GET", "/api/outbound/emails?per_page=10", { token: a.apiKey })
    expect(page.status).toBe(200)
    expect(page.headers.get("content-length")).toBeNull()
    expect(page.body.pagination).toEqual({ page: 1, per_page: 10, total: 4, total_pages: 1 })
    expect(page.body.data.map((m: { id: number }) => m.id)).toEqual([...ids].reverse())
    expect(page.body.data.map((m: { text_body: string }) => m.text_body.length)).toEqual([...bodies].reverse().map((b) => b.length))
    expect(page.body.data[2].html_body).toBe("<p>big</p>")
    const one = await api.call("GET", `/api/outbound/emails/${ids[2]}`, { token: a.apiKey })
    const { recipients: _, ...listed } = one.body.data
    expect(page.body.data[1]).toEqual(listed)
  })
})

describe("recipients the relay refuses", () => {
  it("one recipient's transaction refused after DATA: that recipient failed and refunded (not suppressed), the others sent", async () => {
    const a = await fundedAccount(api, 100)
    const [ok, blocked] = [rcpt("ok"), rcpt("blocked")]
    relay.behaviour.dataRefuse.set(blocked, 554)
    const res = await send(api, a, { to: [ok, blocked], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ status: "sent", amount_tzs: 5 })
    const byEmail = Object.fromEntries((await detail(api, a, res.body.data.id)).body.data.recipients.map((r: { email: string }) => [r.email, r]))
    expect(byEmail[ok]).toMatchObject({ status: "sent", error: null, provider_code: 250 })
    expect(byEmail[blocked]).toMatchObject({ status: "failed", error: "provider_error", provider_code: null })
    expect(relay.received.map((r) => r.to)).toEqual([[ok]])
    expect(await balance(api, a.userId)).toBe(95)
    expect(await query(api, "SELECT email FROM suppressions WHERE user_id = $1", [a.userId])).toEqual([])
    await expectLedgerConsistent(api)
  })

  it("marks a 550 recipient failed, refunds it, suppresses it; the others are sent", async () => {
    const a = await fundedAccount(api, 100)
    const [ok, gone, busy] = [rcpt("ok"), rcpt("gone"), rcpt("busy")]
    relay.behaviour.refuse.set(gone, 550)
    relay.behaviour.refuse.set(busy, 450)
    const res = await send(api, a, { to: [ok, gone], bcc: [busy], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ status: "sent", amount_tzs: 5 })
    const d = await detail(api, a, res.body.data.id)
    expect(d.status).toBe(200)
    const byEmail = Object.fromEntries(d.body.data.recipients.map((r: { email: string }) => [r.email, r]))
    expect(byEmail[ok]).toMatchObject({ kind: "to", status: "sent", provider_code: 250, error: null })
    expect(byEmail[ok].provider_message_id).toBe(res.body.data.provider_message_id)
    expect(byEmail[gone]).toMatchObject({ kind: "to", status: "failed", provider_code: 550, error: "rejected", provider_message_id: null })
    expect(byEmail[busy]).toMatchObject({ kind: "bcc", status: "failed", provider_code: 450, error: "rejected" })
    expect(relay.received[0]!.to).toEqual([ok])
    expect(await balance(api, a.userId)).toBe(95)
    // One refund entry per refused recipient.
    expect(await movements(api, a.userId)).toEqual([
      { kind: "debit", amount_tzs: -15, reference_type: "outbound_message", reference_id: String(res.body.data.id) },
      { kind: "refund", amount_tzs: 5, reference_type: "outbound_message", reference_id: String(res.body.data.id) },
      { kind: "refund", amount_tzs: 5, reference_type: "outbound_message", reference_id: String(res.body.data.id) },
    ])
    const notes = await query<{ description: string }>(api, "SELECT description FROM ledger_entries WHERE user_id = $1 AND kind = 'refund' ORDER BY id", [a.userId])
    expect(notes.map((n) => n.description).sort()).toEqual([
      `refund: ${busy} refused by the mail provider (450)`,
      `refund: ${gone} refused by the mail provider (550)`,
    ].sort())
    // Only the permanent failure is suppressed.
    const list = await api.call("GET", "/api/outbound/suppressions", { token: a.apiKey })
    expect(list.body.data.map((s: { email: string }) => s.email)).toEqual([gone])
    expect(list.body.data[0]).toMatchObject({ reason: "rejected", provider_code: 550, message_id: res.body.data.id })

    // The next send leaves the suppressed address out before charging.
    relay.reset()
    const next = await send(api, a, { to: [gone, ok, busy], subject: "again", text_body: "t" })
    expect(next.status).toBe(201)
    expect(next.body.data.amount_tzs).toBe(10)
    expect(relay.received.flatMap((r) => r.to).sort()).toEqual([ok, busy].sort())
    const nd = await detail(api, a, next.body.data.id)
    expect(nd.body.data.recipients.find((r: { email: string }) => r.email === gone)).toMatchObject({
      status: "failed", error: "suppressed", provider_code: null,
    })
    expect(await balance(api, a.userId)).toBe(85)

    // Every recipient suppressed: 400 SUPPRESSED, nothing written, nothing charged.
    const before = await movements(api, a.userId)
    const all = await send(api, a, { to: [gone.toUpperCase()], subject: "s", text_body: "t" })
    expect(all.status).toBe(400)
    expect(all.body.errors[0].code).toBe("SUPPRESSED")
    expect(await movements(api, a.userId)).toEqual(before)

    // Taking it off the list lets it through again.
    const del = await api.call("DELETE", `/api/outbound/suppressions/${encodeURIComponent(gone)}`, { token: a.apiKey })
    expect(del.status).toBe(200)
    expect((await api.call("DELETE", `/api/outbound/suppressions/${encodeURIComponent(gone)}`, { token: a.apiKey })).status).toBe(404)
    relay.behaviour.refuse.delete(gone)
    expect((await send(api, a, { to: [gone], subject: "s", text_body: "t" })).status).toBe(201)
    await expectLedgerConsistent(api)
  })

  it("a message whose every recipient is refused is failed (201) and fully refunded", async () => {
    const a = await fundedAccount(api, 100)
    const [x, y] = [rcpt(), rcpt()]
    relay.behaviour.refuse.set(x, 550)
    relay.behaviour.refuse.set(y, 551)
    const res = await send(api, a, { to: [x, y], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ status: "failed", error_code: "RECIPIENTS_REJECTED", amount_tzs: 0, provider_message_id: null })
    expect(await balance(api, a.userId)).toBe(100)
    expect(relay.received).toHaveLength(0)
    const d = await detail(api, a, res.body.data.id)
    expect(d.body.data.recipients.map((r: { provider_code: number }) => r.provider_code).sort()).toEqual([550, 551])
    await expectLedgerConsistent(api)
  })

  it("suppressions are per account", async () => {
    const a = await fundedAccount(api, 100)
    const b = await fundedAccount(api, 100)
    const x = rcpt()
    relay.behaviour.refuse.set(x, 550)
    await send(api, a, { to: [x, rcpt()], subject: "s", text_body: "t" })
    relay.behaviour.refuse.delete(x)
    const res = await send(api, b, { to: [x], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data.status).toBe("sent")
  })
})

describe("provider failures as a whole: 502 PROVIDER_ERROR, message failed, fully refunded", () => {
  const expectFailedAndRefunded = async (app: TestApp, accountId: number, res: { status: number; body: any }) => {
    expect(res.status).toBe(502)
    expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
    // No relay text or internals in the answer.
    expect(JSON.stringify(res.body)).not.toMatch(/ECONNREFUSED|EENVELOPE|127\.0\.0\.1/)
    const [m] = await query<{ id: number; status: string; error_code: string; amount_tzs: number }>(
      app,
      "SELECT id, status, error_code, amount_tzs FROM outbound_messages WHERE user_id = $1",
      [accountId],
    )
    expect(m).toMatchObject({ status: "failed", error_code: "PROVIDER_ERROR", amount_tzs: 0 })
    expect(res.body.message).toContain(`outbound message ${m!.id}`)
    expect(await balance(app, accountId)).toBe(100)
    expect(await movements(app, accountId)).toEqual([
      { kind: "debit", amount_tzs: -10, reference_type: "outbound_message", reference_id: String(m!.id) },
      { kind: "refund", amount_tzs: 10, reference_type: "outbound_message", reference_id: String(m!.id) },
    ])
    const recipients = await query<{ status: string; error: string }>(app, "SELECT status, error FROM outbound_recipients WHERE message_id = $1", [m!.id])
    expect(recipients).toEqual([{ status: "failed", error: "provider_error" }, { status: "failed", error: "provider_error" }])
    await expectLedgerConsistent(app)
  }

  it("relay refuses MAIL FROM (451)", async () => {
    const a = await fundedAccount(api, 100)
    relay.behaviour.mailFromCode = 451
    await expectFailedAndRefunded(api, a.userId, await send(api, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" }))
  })

  it("relay refuses the message after DATA (554); no recipient is suppressed", async () => {
    const a = await fundedAccount(api, 100)
    relay.behaviour.dataCode = 554
    await expectFailedAndRefunded(api, a.userId, await send(api, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" }))
    expect(await query(api, "SELECT * FROM suppressions WHERE user_id = $1", [a.userId])).toEqual([])
  })

  it("relay unreachable (connection refused)", async () => {
    const down = await makeOutboundApp({ relayUrl: `smtp://127.0.0.1:${await closedPort()}` })
    try {
      const a = await fundedAccount(down, 100)
      await expectFailedAndRefunded(down, a.userId, await send(down, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" }))
    } finally {
      await down.stop()
    }
  })

  it("relay drops the connection in the middle of DATA", async () => {
    const dropping = await startDroppingServer()
    const app = await makeOutboundApp({ relayUrl: dropping.url })
    try {
      const a = await fundedAccount(app, 100)
      await expectFailedAndRefunded(app, a.userId, await send(app, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" }))
    } finally {
      await app.stop()
      await dropping.close()
    }
  })
})

describe("refusals that write nothing", () => {
  it("402 INSUFFICIENT_BALANCE when the wallet cannot cover every recipient", async () => {
    const a = await fundedAccount(api, 9)
    const res = await send(api, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" })
    expect(res.status).toBe(402)
    expect(res.body.errors[0].code).toBe("INSUFFICIENT_BALANCE")
    expect(await balance(api, a.userId)).toBe(9)
    await expectNothingWritten(api, a.userId)
    expect(relay.received).toHaveLength(0)
    // Exactly enough works, down to zero.
    await fund(api, a.userId, 1)
    expect((await send(api, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" })).status).toBe(201)
    expect(await balance(api, a.userId)).toBe(0)
  })

  it("concurrent sends never overdraw: exactly what the wallet covers is sent", async () => {
    const a = await fundedAccount(api, 50)
    const results = await Promise.all(Array.from({ length: 20 }, () => send(api, a, { to: [rcpt()], subject: "s", text_body: "t" })))
    expect(results.filter((r) => r.status === 201)).toHaveLength(10)
    expect(results.filter((r) => r.status === 402)).toHaveLength(10)
    expect(await balance(api, a.userId)).toBe(0)
    expect(relay.received).toHaveLength(10)
    const [n] = await query<{ n: number }>(api, "SELECT count(*)::int8 AS n FROM outbound_messages WHERE user_id = $1", [a.userId])
    expect(n!.n).toBe(10)
    await expectLedgerConsistent(api)
  })

  it("403 FORBIDDEN without a verified email or phone", async () => {
    const a = await createAccount(api, { emailVerified: false, phoneVerified: false })
    await fund(api, a.userId, 100)
    const res = await send(api, a, { to: [rcpt()], subject: "s", text_body: "t" })
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("FORBIDDEN")
    await expectNothingWritten(api, a.userId)
    const phoneOnly = await createAccount(api, { emailVerified: false, phoneVerified: true })
    await fund(api, phoneOnly.userId, 100)
    expect((await send(api, phoneOnly, { to: [rcpt()], subject: "s", text_body: "t" })).status).toBe(201)
  })

  it("REQUIRE_PHONE_FOR_OUTBOUND: a verified email is not enough", async () => {
    const strict = await makeOutboundApp({ relayUrl: relay.url, settings: { requirePhoneForOutbound: true } })
    try {
      const a = await fundedAccount(strict, 100, { emailVerified: true })
      const res = await send(strict, a, { to: [rcpt()], subject: "s", text_body: "t" })
      expect(res.status).toBe(403)
      expect(res.body.errors[0].message).toContain("phone")
      await expectNothingWritten(strict, a.userId)
    } finally {
      await strict.stop()
    }
  })

  it("scopes: outbound:send to send, outbound:read to read; no credentials 401", async () => {
    const reader = await fundedAccount(api, 100, { scopes: "outbound:read" })
    expect((await send(api, reader, { to: [rcpt()], subject: "s", text_body: "t" })).status).toBe(403)
    await expectNothingWritten(api, reader.userId)
    const sender = await fundedAccount(api, 100, { scopes: "outbound:send" })
    const sent = await send(api, sender, { to: [rcpt()], subject: "s", text_body: "t" })
    expect(sent.status).toBe(201)
    expect((await detail(api, sender, sent.body.data.id)).status).toBe(403)
    expect((await api.call("GET", "/api/outbound/emails", { token: sender.apiKey })).status).toBe(403)
    expect((await api.call("GET", "/api/outbound/emails", { token: reader.apiKey })).status).toBe(200)
    expect((await api.call("POST", "/api/outbound/emails", { body: { to: [rcpt()], subject: "s", text_body: "t" } })).status).toBe(401)
    // A JWT acts with every scope.
    expect((await api.call("GET", "/api/outbound/emails", { token: sender.token })).status).toBe(200)
  })
})

describe("GET /api/outbound/emails[/id]", () => {
  it("lists newest first with pagination; the detail of another account's message is 403, unknown 404", async () => {
    const a = await fundedAccount(api, 1000)
    const ids: Array<number> = []
    for (let i = 0; i < 25; i++) {
      const r = await send(api, a, { to: [rcpt()], subject: `m${i}`, text_body: "t" })
      ids.push(r.body.data.id)
    }
    const page1 = await api.call("GET", "/api/outbound/emails", { token: a.apiKey })
    expect(page1.status).toBe(200)
    expect(page1.body.pagination).toEqual({ page: 1, per_page: 20, total: 25, total_pages: 2 })
    expect(page1.body.data.map((m: { id: number }) => m.id)).toEqual([...ids].reverse().slice(0, 20))
    const page2 = await api.call("GET", "/api/outbound/emails?page=2&per_page=20", { token: a.apiKey })
    expect(page2.body.data.map((m: { subject: string }) => m.subject)).toEqual(["m4", "m3", "m2", "m1", "m0"])
    for (const bad of ["page=0", "per_page=101", "per_page=abc"]) {
      const r = await api.call("GET", `/api/outbound/emails?${bad}`, { token: a.apiKey })
      expect(r.status).toBe(400)
      expect(r.body.errors[0].field).toBe(bad.split("=")[0])
    }

    const other = await fundedAccount(api, 100)
    const foreign = await detail(api, other, ids[0]!)
    expect(foreign.status).toBe(403)
    expect(JSON.stringify(foreign.body)).not.toContain("m0")
    expect((await detail(api, a, 99_999_999)).status).toBe(404)
    // Mail handed to the relay has no capture.
    expect((await api.call("GET", `/api/outbound/emails/${ids[0]}/raw`, { token: a.apiKey })).status).toBe(404)
    expect((await api.call("GET", "/api/outbound/emails", { token: other.apiKey })).body.data).toEqual([])
    const d = await detail(api, a, ids[0]!)
    expect(Object.keys(d.body.data.recipients[0]).sort()).toEqual([
      "created_at", "email", "error", "feedback", "kind", "provider_code", "provider_message_id", "status", "updated_at",
    ])
    expect(d.body.data.recipients[0].feedback).toBeNull()
  })
})
