/**
 * POST /api/outbound/emails/batch: one message per recipient (nobody sees another), provider
 * calls in chunks of 50 recorded as they finish, the whole cost checked up front (402 sends
 * nothing), suppressed recipients left out, per-message failures refunded.
 */
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { TestApp } from "../support/app.ts"
import {
  balance,
  detail,
  expectLedgerConsistent,
  expectNothingWritten,
  fundedAccount,
  makeOutboundApp,
  movements,
  query,
  rcpt,
  sendBatch,
  startRelay,
  type TestRelay,
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

describe("a batch", () => {
  // The provider is handed at most DISPATCH_BUDGET_BYTES (32 MiB) of composed mail at once: a
  // batch of large messages goes one at a time (ten at a time, such a batch grew the process by
  // over a gigabyte), small mail still goes ten at a time. The relay answers each message after
  // 150 ms, so what overlaps shows.
  it("hands the provider one large message at a time and small ones together", async () => {
    const a = await fundedAccount(api, 1000)
    relay.behaviour.dataDelayMs = 150
    const data = Buffer.alloc(9 * 1024 * 1024, 7).toString("base64")
    const large = await sendBatch(api, a, {
      to: [rcpt("L"), rcpt("L"), rcpt("L")],
      subject: "large",
      text_body: "see attached",
      attachments: [{ filename: "a.bin", content_type: "application/octet-stream", data_base64: data }, { filename: "b.bin", content_type: "application/octet-stream", data_base64: data }],
    })
    expect(large.status, JSON.stringify(large.body)).toBe(201)
    expect(large.body.data).toMatchObject({ total: 3, sent: 3 })
    expect(relay.received).toHaveLength(3)
    expect(relay.mostAtOnce()).toBe(1)

    relay.reset()
    relay.behaviour.dataDelayMs = 150
    const small = await sendBatch(api, a, { to: Array.from({ length: 10 }, () => rcpt("S")), subject: "small", text_body: "hi" })
    expect(small.body.data).toMatchObject({ total: 10, sent: 10 })
    expect(relay.mostAtOnce()).toBeGreaterThan(1)
  })

  it("sends each recipient a message of their own and answers total, sent, failed and the messages", async () => {
    const a = await fundedAccount(api, 100)
    const to = [rcpt("b"), `Juma <${rcpt("b")}>`, rcpt("b")]
    const res = await sendBatch(api, a, { to, subject: "News for {{name}}", text_body: "Hello {{name}}", variables: { name: "all" } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const data = res.body.data
    expect(data).toMatchObject({ total: 3, sent: 3, failed: 0, suppressed: [] })
    expect(data.messages).toHaveLength(3)
    expect(Object.keys(data.messages[0]).sort()).toEqual(["amount_tzs", "created_at", "error_code", "id", "provider_message_id", "status", "to"])
    const bare = to.map((t) => t.replace(/^.*<|>$/g, ""))
    expect(data.messages.map((m: { to: string }) => m.to)).toEqual(bare)
    expect(data.messages.every((m: { status: string; amount_tzs: number }) => m.status === "sent" && m.amount_tzs === 5)).toBe(true)

    expect(relay.received).toHaveLength(3)
    for (const email of bare) {
      const got = relay.to(email)
      expect(got).toHaveLength(1)
      expect(got[0]!.to).toEqual([email])
      // Nobody else's address is anywhere in the message.
      for (const otherEmail of bare.filter((e) => e !== email)) expect(got[0]!.raw).not.toContain(otherEmail)
      const parsed = await simpleParser(got[0]!.raw)
      expect(parsed.subject).toBe("News for all")
    }
    const named = await simpleParser(relay.to(bare[1]!)[0]!.raw)
    expect(named.to && !Array.isArray(named.to) ? named.to.value : []).toEqual([{ address: bare[1], name: "Juma" }])

    const d = await detail(api, a, data.messages[0].id)
    expect(d.body.data).toMatchObject({ to_addresses: [bare[0]], cc_addresses: [], bcc_addresses: [], subject: "News for all", text_body: "Hello all" })
    expect(await balance(api, a.userId)).toBe(85)
    const [content] = await query<{ id: number }>(api, "SELECT DISTINCT content_id AS id FROM outbound_messages WHERE user_id = $1", [a.userId])
    // One up-front debit for the batch.
    expect(await movements(api, a.userId)).toEqual([{ kind: "debit", amount_tzs: -15, reference_type: "outbound_batch", reference_id: String(content!.id) }])
    await expectLedgerConsistent(api)
  })

  it("goes to the provider in chunks of 50: 120 recipients, 120 messages, every one recorded", async () => {
    const a = await fundedAccount(api, 600)
    const to = Array.from({ length: 120 }, () => rcpt("c"))
    const started = performance.now()
    const res = await sendBatch(api, a, { to, subject: "s", text_body: "t" })
    const ms = performance.now() - started
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ total: 120, sent: 120, failed: 0 })
    expect(relay.received).toHaveLength(120)
    expect(new Set(relay.received.flatMap((r) => r.to))).toEqual(new Set(to))
    expect(await balance(api, a.userId)).toBe(0)
    const queued = await query(api, "SELECT id FROM outbound_messages WHERE user_id = $1 AND status <> 'sent'", [a.userId])
    expect(queued).toEqual([])
    console.log(`batch of 120 through the relay: ${Math.round(ms)} ms`)
  })

  it("refunds the messages the relay refuses and suppresses permanent failures", async () => {
    const a = await fundedAccount(api, 100)
    const [ok, gone, busy] = [rcpt(), rcpt(), rcpt()]
    relay.behaviour.refuse.set(gone, 550)
    relay.behaviour.refuse.set(busy, 452)
    const res = await sendBatch(api, a, { to: [ok, gone, busy], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ total: 3, sent: 1, failed: 2 })
    const byTo = Object.fromEntries(res.body.data.messages.map((m: { to: string }) => [m.to, m]))
    expect(byTo[gone]).toMatchObject({ status: "failed", error_code: "RECIPIENTS_REJECTED", amount_tzs: 0 })
    expect(byTo[busy]).toMatchObject({ status: "failed", amount_tzs: 0 })
    expect(byTo[ok]).toMatchObject({ status: "sent", amount_tzs: 5 })
    expect(await balance(api, a.userId)).toBe(95)
    const refunds = (await movements(api, a.userId)).filter((m) => m.kind === "refund")
    expect(refunds.map((r) => [r.amount_tzs, r.reference_type]).sort()).toEqual([[5, "outbound_message"], [5, "outbound_message"]])
    const suppressed = await query<{ email: string }>(api, "SELECT email FROM suppressions WHERE user_id = $1", [a.userId])
    expect(suppressed.map((s) => s.email)).toEqual([gone])

    // Next time the suppressed one is left out, listed, and not charged.
    relay.reset()
    const again = await sendBatch(api, a, { to: [gone.toUpperCase(), ok], subject: "s", text_body: "t" })
    expect(again.body.data).toMatchObject({ total: 1, sent: 1, suppressed: [gone.toUpperCase()] })
    expect(await balance(api, a.userId)).toBe(90)
    const allSuppressed = await sendBatch(api, a, { to: [gone], subject: "s", text_body: "t" })
    expect(allSuppressed.status).toBe(400)
    expect(allSuppressed.body.errors[0].code).toBe("SUPPRESSED")
    await expectLedgerConsistent(api)
  })

  it("a provider failure fails only the messages it hit; the batch answers 201", async () => {
    const a = await fundedAccount(api, 100)
    relay.behaviour.dataCode = 554
    const res = await sendBatch(api, a, { to: [rcpt(), rcpt()], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ total: 2, sent: 0, failed: 2 })
    expect(res.body.data.messages.every((m: { error_code: string }) => m.error_code === "PROVIDER_ERROR")).toBe(true)
    expect(await balance(api, a.userId)).toBe(100)
    await expectLedgerConsistent(api)
  })

  it("sends a duplicate once", async () => {
    const a = await fundedAccount(api, 100)
    const x = rcpt()
    const res = await sendBatch(api, a, { to: [x, x.toUpperCase(), `X <${x}>`], subject: "s", text_body: "t" })
    expect(res.body.data.total).toBe(1)
    expect(relay.received).toHaveLength(1)
  })
})

describe("refusals that write nothing", () => {
  it("402 when the whole batch cannot be covered, even if part of it could", async () => {
    const a = await fundedAccount(api, 14)
    const res = await sendBatch(api, a, { to: [rcpt(), rcpt(), rcpt()], subject: "s", text_body: "t" })
    expect(res.status).toBe(402)
    expect(res.body.errors[0].code).toBe("INSUFFICIENT_BALANCE")
    expect(relay.received).toHaveLength(0)
    await expectNothingWritten(api, a.userId)
    expect(await balance(api, a.userId)).toBe(14)
  })

  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["cc", { to: ["a@dest.example"], cc: ["b@dest.example"], subject: "s", text_body: "t" }, ["cc"]],
    ["bcc", { to: ["a@dest.example"], bcc: ["b@dest.example"], subject: "s", text_body: "t" }, ["bcc"]],
    ["no to", { subject: "s", text_body: "t" }, ["to"]],
    ["an empty to", { to: [], subject: "s", text_body: "t" }, ["to"]],
    ["a bad recipient", { to: ["a@dest.example", "nope"], subject: "s", text_body: "t" }, ["to.1"]],
    ["1001 recipients", { to: Array.from({ length: 1001 }, (_, i) => `r${i}@dest.example`), subject: "s", text_body: "t" }, ["to"]],
    ["no subject", { to: ["a@dest.example"], text_body: "t" }, ["subject"]],
    ["no body", { to: ["a@dest.example"], subject: "s" }, ["text_body"]],
    ["a bad attachment", { to: ["a@dest.example"], subject: "s", text_body: "t", attachments: [{ filename: "a", content_type: "text/plain", data_base64: "!" }] }, [
      "attachments.0.data_base64",
    ]],
  ])("400 for %s", async (_, body, fields) => {
    const a = await fundedAccount(api, 100)
    const res = await sendBatch(api, a, body)
    expect(res.status, JSON.stringify(res.body)).toBe(400)
    expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual(fields)
    await expectNothingWritten(api, a.userId)
    expect(relay.received).toHaveLength(0)
  })
})
