/**
 * Acceptance: SPEC.md "Outbound email" and templates, with DECISIONS.md's detail shape
 * (recipients[{email, kind, status, provider_code, provider_message_id, created_at, updated_at}]),
 * 5 TZS per recipient debited before dispatch and refunded on provider failure, 402/403/400
 * SUPPRESSED, batch data and template deletion. The relay is a real local SMTP server.
 */
import { Layer, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OutboundRateLimit } from "../../effects/outbound/limits.ts"
import { ROOMY_RATE, startRelay, type TestRelay } from "../outbound/support.ts"
import {
  type AuthTestApp,
  balanceVia,
  createKeyVia,
  creditVia,
  expectError,
  expectLedgerMatches,
  expectOk,
  onboard,
  type Onboarded,
  registerVia,
  RFC3339_Z,
  startService,
} from "./support.ts"

let t: AuthTestApp
let relay: TestRelay
beforeAll(async () => {
  relay = await startRelay()
  t = await startService({
    settings: { smtpRelayUrl: Option.some(relay.url) },
    layers: [Layer.succeed(OutboundRateLimit, ROOMY_RATE) as Layer.Layer<never, never, never>],
  })
})
afterAll(async () => {
  await t.api.stop()
  await relay.close()
})

const call = (method: string, path: string, key: string, body?: unknown) => t.api.call(method, path, { token: key, ...(body === undefined ? {} : { body }) })
const send = (acc: Onboarded, body: Record<string, unknown>) => call("POST", "/api/outbound/emails", acc.key, { subject: "Hi", text_body: "Habari", ...body })
let seq = 0
const rcpt = (p = "r") => `${p}${++seq}-${process.pid}@customer.example`

const MESSAGE_FIELDS = [
  "amount_tzs",
  "bcc_addresses",
  "cc_addresses",
  "created_at",
  "error_code",
  "from_address",
  "html_body",
  "id",
  "provider_message_id",
  "status",
  "subject",
  "text_body",
  "to_addresses",
  "user_id",
]
const RECIPIENT_FIELDS = ["created_at", "email", "kind", "provider_code", "provider_message_id", "status", "updated_at"]

const funded = async (amount = 1000) => {
  const acc = await onboard(t)
  if (amount > 0) await creditVia(t, acc.user.id, amount)
  return acc
}

describe("POST /api/outbound/emails", () => {
  it("201 with the OutboundMessage, 5 TZS per to+cc+bcc, detail with per-recipient records, list paginated", async () => {
    const acc = await funded(100)
    const to = rcpt(), cc = rcpt(), bcc = rcpt()
    const res = await send(acc, { to: [`Asha <${to}>`], cc: [cc], bcc: [bcc], html_body: "<p>Habari</p>" })
    const m = expectOk(res, 201) as Record<string, any>
    for (const f of MESSAGE_FIELDS) expect(m, f).toHaveProperty(f)
    expect(m).toMatchObject({ user_id: acc.user.id, status: "sent", amount_tzs: 15, subject: "Hi", cc_addresses: [cc], bcc_addresses: [bcc] })
    expect(m.to_addresses.join()).toContain(to)
    expect(m.from_address).toMatch(/@inbox\.localhost$/)
    expect(m.created_at).toMatch(RFC3339_Z)
    expect(await balanceVia(t, acc.key)).toBe(85)
    await expectLedgerMatches(t, acc.key)
    expect(relay.to(to)).toHaveLength(1)

    const d = expectOk(await call("GET", `/api/outbound/emails/${m.id}`, acc.key)) as Record<string, any>
    for (const f of MESSAGE_FIELDS) expect(d, f).toHaveProperty(f)
    expect(d.recipients).toHaveLength(3)
    for (const r of d.recipients) {
      for (const f of RECIPIENT_FIELDS) expect(r, f).toHaveProperty(f)
      expect(r.status).toBe("sent")
      expect(r.created_at).toMatch(RFC3339_Z)
      expect(r.updated_at).toMatch(RFC3339_Z)
    }
    expect(d.recipients.map((r: any) => [r.email, r.kind]).sort()).toEqual([[bcc, "bcc"], [cc, "cc"], [to, "to"]].sort())

    await send(acc, { to: [rcpt()] })
    const list = await call("GET", "/api/outbound/emails?per_page=1", acc.key)
    expect(expectOk(list)).toHaveLength(1)
    expect(list.body.pagination).toEqual({ page: 1, per_page: 1, total: 2, total_pages: 2 })
    expectError(await call("GET", "/api/outbound/emails?per_page=0", acc.key), 400, "VALIDATION_ERROR")

    const other = await funded(0)
    expectError(await call("GET", `/api/outbound/emails/${m.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("GET", "/api/outbound/emails/99999999", acc.key), 404, "NOT_FOUND")
    expect(expectOk(await call("GET", "/api/outbound/emails", other.key))).toEqual([])
  })

  it("400 VALIDATION_ERROR: missing subject, bad recipient, bad attachment base64, >50 recipients, >10 attachments, foreign from_address", async () => {
    const acc = await funded(1000)
    expectError(await call("POST", "/api/outbound/emails", acc.key, { to: [rcpt()], text_body: "x" }), 400, "VALIDATION_ERROR", "subject")
    expectError(await send(acc, { to: ["not-an-email"] }), 400, "VALIDATION_ERROR", "to.0")
    expectError(await send(acc, { to: [rcpt()], cc: [rcpt(), "bad@"] }), 400, "VALIDATION_ERROR", "cc.1")
    expectError(await send(acc, { to: [] }), 400, "VALIDATION_ERROR")
    expectError(
      await send(acc, { to: [rcpt()], attachments: [{ filename: "a.txt", content_type: "text/plain", size: 3, data_base64: "!!!not base64!!!" }] }),
      400,
      "VALIDATION_ERROR",
      "attachments.0.data_base64",
    )
    const good = { filename: "a.txt", content_type: "text/plain", size: 3, data_base64: Buffer.from("abc").toString("base64") }
    expectError(await send(acc, { to: [rcpt()], attachments: Array.from({ length: 11 }, () => good) }), 400, "VALIDATION_ERROR")
    expectError(await send(acc, { to: Array.from({ length: 30 }, () => rcpt()), cc: Array.from({ length: 21 }, () => rcpt()) }), 400, "VALIDATION_ERROR")
    expectError(await send(acc, { to: [rcpt()], from_address: "me@gmail.com" }), 400, "VALIDATION_ERROR", "from_address")
    expectError(await send(acc, { to: [rcpt()], variables: { a: 1 } }), 400, "VALIDATION_ERROR")
    expect(await balanceVia(t, acc.key)).toBe(1000)

    // a platform local part is allowed; an attachment goes through
    const ok = expectOk(await send(acc, { to: [rcpt()], from_address: "billing@inbox.localhost", attachments: [good] }), 201)
    expect(ok.from_address).toContain("billing@inbox.localhost")
  })

  it("402 INSUFFICIENT_BALANCE on an empty wallet; 403 for an unverified identity; 403 without outbound:send", async () => {
    const empty = await funded(0)
    expectError(await send(empty, { to: [rcpt()] }), 402, "INSUFFICIENT_BALANCE")
    expect(expectOk(await call("GET", "/api/outbound/emails", empty.key))).toEqual([])
    const s = await registerVia(t)
    const k = await createKeyVia(t, s.token)
    await creditVia(t, s.user.id, 100)
    expectError(await call("POST", "/api/outbound/emails", k.key, { to: [rcpt()], subject: "x", text_body: "y" }), 403, "FORBIDDEN")
    const ro = await onboard(t, { scopes: "outbound:read" })
    expectError(await send(ro, { to: [rcpt()] }), 403, "FORBIDDEN")
    expectOk(await call("GET", "/api/outbound/emails", ro.key))
  })

  it("provider failure: 502 PROVIDER_ERROR, fully refunded; a refused recipient: refunded and then suppressed (400 SUPPRESSED)", async () => {
    const acc = await funded(100)
    relay.behaviour.dataCode = 554
    try {
      expectError(await send(acc, { to: [rcpt(), rcpt()] }), 502, "PROVIDER_ERROR")
    } finally {
      relay.behaviour.dataCode = null
    }
    expect(await balanceVia(t, acc.key)).toBe(100)
    await expectLedgerMatches(t, acc.key)
    const failed = (expectOk(await call("GET", "/api/outbound/emails", acc.key)) as Array<any>)[0]
    expect(failed.status).toBe("failed")

    const bad = rcpt("bounce")
    const good = rcpt()
    relay.behaviour.refuse.set(bad, 550)
    const m = expectOk(await send(acc, { to: [good, bad] }), 201) as Record<string, any>
    expect(m.status).toBe("sent")
    expect(await balanceVia(t, acc.key)).toBe(95)
    const d = expectOk(await call("GET", `/api/outbound/emails/${m.id}`, acc.key)) as Record<string, any>
    const r = d.recipients.find((x: any) => x.email === bad)
    expect(r).toMatchObject({ status: "failed", kind: "to" })
    expect(String(r.provider_code)).toContain("550")
    expectError(await send(acc, { to: [bad] }), 400, "SUPPRESSED")
    // suppressed recipients are dropped before charging
    const mixed = expectOk(await send(acc, { to: [bad, good] }), 201) as Record<string, any>
    expect(mixed.amount_tzs).toBe(5)
    expect(await balanceVia(t, acc.key)).toBe(90)
    await expectLedgerMatches(t, acc.key)
  })
})

describe("POST /api/outbound/emails/batch", () => {
  it("201 with data {total, sent, failed, …}, one message per recipient, 5 TZS each; 402 up front", async () => {
    const acc = await funded(100)
    const tos = [rcpt(), rcpt(), rcpt()]
    const res = await call("POST", "/api/outbound/emails/batch", acc.key, { to: tos, subject: "News", text_body: "Hi" })
    const d = expectOk(res, 201) as Record<string, any>
    expect(d).toMatchObject({ total: 3, sent: 3, failed: 0 })
    expect(await balanceVia(t, acc.key)).toBe(85)
    for (const to of tos) expect(relay.to(to)).toHaveLength(1)
    expect(relay.to(tos[0]!)[0]!.raw).not.toContain(tos[1]!)
    const poor = await funded(10)
    expectError(await call("POST", "/api/outbound/emails/batch", poor.key, { to: tos, subject: "News", text_body: "Hi" }), 402, "INSUFFICIENT_BALANCE")
    expect(await balanceVia(t, poor.key)).toBe(10)
    expectError(await call("POST", "/api/outbound/emails/batch", acc.key, { to: tos, text_body: "Hi" }), 400, "VALIDATION_ERROR", "subject")
  })
})

describe("templates", () => {
  it("create 201, get, list, PATCH, render with variables (unknown → empty), inline overrides, delete → deleted_template_id", async () => {
    const acc = await funded(100)
    const tpl = expectOk(
      await call("POST", "/api/outbound/templates", acc.key, { name: "welcome", subject: "Karibu {{name}}", text_body: "Hi {{name}}{{missing}}!", html_body: "<p>{{name}}</p>" }),
      201,
    ) as Record<string, any>
    for (const f of ["id", "name", "subject", "html_body", "text_body"]) expect(tpl, f).toHaveProperty(f)
    expect(expectOk(await call("GET", `/api/outbound/templates/${tpl.id}`, acc.key))).toMatchObject({ id: tpl.id, name: "welcome" })
    expect((expectOk(await call("GET", "/api/outbound/templates", acc.key)) as Array<any>).map((x) => x.id)).toEqual([tpl.id])
    expectError(await call("POST", "/api/outbound/templates", acc.key, { subject: "x" }), 400, "VALIDATION_ERROR", "name")

    const to = rcpt()
    const m = expectOk(await call("POST", "/api/outbound/emails", acc.key, { to: [to], template_id: tpl.id, variables: { name: "Asha" } }), 201)
    expect(m).toMatchObject({ subject: "Karibu Asha", text_body: "Hi Asha!", html_body: "<p>Asha</p>" })
    const over = expectOk(await call("POST", "/api/outbound/emails", acc.key, { to: [to], template_id: tpl.id, variables: { name: "Juma" }, text_body: "inline" }), 201)
    expect(over).toMatchObject({ subject: "Karibu Juma", text_body: "inline" })
    expectError(await call("POST", "/api/outbound/emails", acc.key, { to: [to], template_id: 99999999 }), 404, "NOT_FOUND")

    const up = expectOk(await call("PATCH", `/api/outbound/templates/${tpl.id}`, acc.key, { name: "welcome2", subject: "S", html_body: "", text_body: "T" }))
    expect(up).toMatchObject({ id: tpl.id, name: "welcome2", subject: "S", text_body: "T" })

    const other = await funded(0)
    expectError(await call("GET", `/api/outbound/templates/${tpl.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("DELETE", `/api/outbound/templates/${tpl.id}`, other.key), 403, "FORBIDDEN")
    const del = await call("DELETE", `/api/outbound/templates/${tpl.id}`, acc.key)
    expect(expectOk(del)).toEqual({ deleted_template_id: tpl.id })
    expectError(await call("GET", `/api/outbound/templates/${tpl.id}`, acc.key), 404, "NOT_FOUND")
    const noScope = await onboard(t, { scopes: "outbound:send" })
    expectError(await call("GET", "/api/outbound/templates", noScope.key), 403, "FORBIDDEN")
  })
})
