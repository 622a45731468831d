/**
 * Acceptance: SPEC.md "AI auto-reply" with DECISIONS.md's gateway contract: config defaults
 * (mode off, enabled true), PUT validation, the draft preview (`data.draft`, message
 * `draft generated`, 400 on empty input, 503 NOT_CONFIGURED without a gateway), and draft mode on
 * real inbound mail through the MX (stored for review, never sent, no auto reply for bulk mail).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeFakeAi } from "../agent/support.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { sendRaw } from "../support/smtp-client.ts"
import { type AuthTestApp, creditVia, expectError, expectOk, onboard, type Onboarded, startService } from "./support.ts"

const ai = makeFakeAi()
let t: AuthTestApp
let bare: AuthTestApp
let dns: TestDnsServer
beforeAll(async () => {
  dns = await startDnsServer(zoneFixture("platform.json"))
  t = await startService({ workers: true, settings: { dnsServers: [dns.address], ...ai.settings }, layers: [ai.layer as never] })
  bare = await startService({ settings: { dnsServers: [dns.address] } })
})
afterAll(async () => {
  await t.api.stop()
  await bare.api.stop()
  await dns.close()
})

let seq = 0
const call = (app: AuthTestApp, method: string, path: string, key: string, body?: unknown) =>
  app.api.call(method, path, { token: key, ...(body === undefined ? {} : { body }) })
const address = async (app: AuthTestApp, acc: Onboarded) =>
  expectOk(await call(app, "POST", "/api/inbound/addresses", acc.key, { local_part: `agent-${process.pid}-${++seq}` }), 201) as Record<string, any>

const CONFIG_FIELDS = ["address_id", "enabled", "mode", "persona", "reply_from_address", "reply_from_domain_id", "updated_at", "user_id"]

describe("agent configs", () => {
  it("defaults (mode off, enabled true), PUT, list, validation, ownership", async () => {
    const acc = await onboard(t)
    const a = await address(t, acc)
    const d = expectOk(await call(t, "GET", `/api/agent/configs/${a.id}`, acc.key)) as Record<string, any>
    for (const f of CONFIG_FIELDS) expect(d, f).toHaveProperty(f)
    expect(d).toMatchObject({ address_id: a.id, user_id: acc.user.id, mode: "off", enabled: true, reply_from_domain_id: null })

    const up = expectOk(await call(t, "PUT", `/api/agent/configs/${a.id}`, acc.key, { mode: "draft", persona: "You help Duka Bora customers.", enabled: true })) as Record<string, any>
    expect(up).toMatchObject({ address_id: a.id, mode: "draft", persona: "You help Duka Bora customers.", enabled: true })
    const list = expectOk(await call(t, "GET", "/api/agent/configs", acc.key)) as Array<Record<string, any>>
    expect(list.map((c) => [c.address_id, c.mode])).toEqual([[a.id, "draft"]])

    expectError(await call(t, "PUT", `/api/agent/configs/${a.id}`, acc.key, { mode: "sometimes" }), 400, "VALIDATION_ERROR", "mode")
    expectError(await call(t, "PUT", `/api/agent/configs/${a.id}`, acc.key, { mode: "auto", enabled: "yes" }), 400, "VALIDATION_ERROR", "enabled")

    const other = await onboard(t)
    expectError(await call(t, "GET", `/api/agent/configs/${a.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call(t, "PUT", `/api/agent/configs/${a.id}`, other.key, { mode: "off" }), 403, "FORBIDDEN")
    expectError(await call(t, "POST", `/api/agent/configs/${a.id}/draft`, other.key, { subject: "Hi" }), 403, "FORBIDDEN")
    expectError(await call(t, "GET", "/api/agent/configs/99999999", acc.key), 404, "NOT_FOUND")
    const noScope = await onboard(t, { scopes: "inbound:read" })
    expectError(await call(t, "GET", "/api/agent/configs", noScope.key), 403, "FORBIDDEN")
  })
})

describe("draft preview", () => {
  it("200 data {draft} with message `draft generated`; 400 on empty input; 503 NOT_CONFIGURED without a gateway", async () => {
    const acc = await onboard(t)
    const a = await address(t, acc)
    ai.behave({ reply: "Habari, asante kwa ujumbe wako." })
    const res = await call(t, "POST", `/api/agent/configs/${a.id}/draft`, acc.key, { subject: "Order", text_body: "Where is my order?" })
    expect(expectOk(res)).toEqual({ draft: "Habari, asante kwa ujumbe wako." })
    expect(res.body.message).toBe("draft generated")
    expectError(await call(t, "POST", `/api/agent/configs/${a.id}/draft`, acc.key, {}), 400, "VALIDATION_ERROR")
    expectError(await call(t, "POST", `/api/agent/configs/${a.id}/draft`, acc.key, { subject: "", text_body: "" }), 400, "VALIDATION_ERROR")
    expect(expectOk(await call(t, "GET", "/api/outbound/emails", acc.key))).toEqual([])

    const b = await onboard(bare)
    const ba = await address(bare, b)
    expectError(await call(bare, "POST", `/api/agent/configs/${ba.id}/draft`, b.key, { subject: "Hi" }), 503, "NOT_CONFIGURED")
  })
})

describe("draft mode on inbound mail", () => {
  it("stores a draft for review (GET /api/agent/drafts), sends nothing; bulk mail gets no draft", async () => {
    const acc = await onboard(t)
    await creditVia(t, acc.user.id, 100)
    const a = await address(t, acc)
    expectOk(await call(t, "PUT", `/api/agent/configs/${a.id}`, acc.key, { mode: "draft" }))
    ai.behave({ reply: "Draft reply text." })
    const to = `${a.local_part}@inbox.localhost`
    const raw = (subject: string, extra = "") =>
      `From: Neema <alice@sender.example>\r\nTo: ${to}\r\nSubject: ${subject}\r\nMessage-ID: <${Math.random()}@sender.example>\r\n${extra}\r\nHabari, is the shop open?\r\n`
    expect((await sendRaw(t.api.ports.mx!, { from: "alice@sender.example", to: [to], raw: raw("Bulk news", "Precedence: bulk\r\n") })).data?.code).toBe(250)
    expect((await sendRaw(t.api.ports.mx!, { from: "alice@sender.example", to: [to], raw: raw("Opening hours") })).data?.code).toBe(250)
    const deadline = Date.now() + 10_000
    let drafts: Array<Record<string, any>> = []
    for (;;) {
      drafts = expectOk(await call(t, "GET", `/api/agent/drafts?address_id=${a.id}`, acc.key)) as Array<Record<string, any>>
      if (drafts.length > 0 || Date.now() > deadline) break
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(drafts).toHaveLength(1)
    expect(JSON.stringify(drafts[0])).toContain("Draft reply text.")
    expect(expectOk(await call(t, "GET", "/api/outbound/emails", acc.key))).toEqual([])
    expect(JSON.stringify(drafts)).not.toContain("Bulk news")
  })
})
