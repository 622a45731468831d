import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { sendRaw } from "../support/smtp-client.ts"
import { createAddress, fund, type InboundTestApp, plainMessage, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const profile = (apiKey: string) => app.api.call("GET", "/api/compliance/profile", { token: apiKey })
const patch = (apiKey: string, body: unknown) => app.api.call("PATCH", "/api/compliance/profile", { token: apiKey, body })
const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}`

describe("compliance profile", () => {
  it("is created with defaults on first read", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const r = await profile(apiKey)
    expect(r.status).toBe(200)
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      user_id: userId,
      pdpc_registered: false,
      pdpc_certificate_number: null,
      pdpc_registered_at: null,
      default_retention_days: 30,
      data_consent_at: null,
      privacy_policy_version: null,
      updated_at: expect.stringMatching(/Z$/),
    })
    expect((await profile(apiKey)).body.data.id).toBe(r.body.data.id)
  })

  it("updates the given fields and leaves the others", async () => {
    const { apiKey } = await createAccount(app.api)
    const r = await patch(apiKey, {
      pdpc_registered: true,
      pdpc_certificate_number: "PDPC/2026/0042",
      pdpc_registered_at: "2026-03-01",
      default_retention_days: 90,
      data_consent_at: "2026-03-02T10:00:00+03:00",
      privacy_policy_version: "v2",
    })
    expect(r.status).toBe(200)
    expect(r.body.data).toMatchObject({
      pdpc_registered: true,
      pdpc_certificate_number: "PDPC/2026/0042",
      pdpc_registered_at: "2026-03-01",
      default_retention_days: 90,
      data_consent_at: "2026-03-02T07:00:00.000Z",
      privacy_policy_version: "v2",
    })
    const partial = await patch(apiKey, { default_retention_days: 365, pdpc_certificate_number: null })
    expect(partial.body.data).toMatchObject({ pdpc_registered: true, pdpc_certificate_number: null, default_retention_days: 365 })
    expect((await profile(apiKey)).body.data).toEqual(partial.body.data)
  })

  it("validates every field (400 with the field)", async () => {
    const { apiKey } = await createAccount(app.api)
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ pdpc_registered_at: "2026-02-30" }, "pdpc_registered_at"],
      [{ pdpc_registered_at: "01/03/2026" }, "pdpc_registered_at"],
      [{ pdpc_registered_at: "2026-03-01T00:00:00Z" }, "pdpc_registered_at"],
      [{ default_retention_days: 0 }, "default_retention_days"],
      [{ default_retention_days: 3651 }, "default_retention_days"],
      [{ default_retention_days: 1.5 }, "default_retention_days"],
      [{ default_retention_days: "30" }, "default_retention_days"],
      [{ pdpc_registered: "yes" }, "pdpc_registered"],
      [{ data_consent_at: "yesterday" }, "data_consent_at"],
      [{ pdpc_certificate_number: 7 }, "pdpc_certificate_number"],
    ]
    for (const [body, field] of bad) {
      const r = await patch(apiKey, body)
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field, code: "VALIDATION_ERROR" })
    }
    expect((await patch(apiKey, { default_retention_days: 1 })).status).toBe(200)
    expect((await patch(apiKey, { default_retention_days: 3650 })).status).toBe(200)
    expect((await patch(apiKey, { pdpc_registered_at: "2024-02-29" })).status).toBe(200)
  })

  it("needs the compliance scope", async () => {
    const other = await createAccount(app.api, { scopes: "inbound:read,inbound:write" })
    expect((await profile(other.apiKey)).status).toBe(403)
    expect((await patch(other.apiKey, { pdpc_registered: true })).status).toBe(403)
    expect((await app.api.call("GET", "/api/compliance/audit-export", { token: other.apiKey })).status).toBe(403)
    const scoped = await createAccount(app.api, { scopes: "compliance" })
    expect((await profile(scoped.apiKey)).status).toBe(200)
    expect((await app.api.call("GET", "/api/compliance/profile")).status).toBe(401)
  })
})

describe("GET /api/compliance/audit-export", () => {
  it("reports the caller's own numbers only", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    await fund(app.api, a.userId, 100)
    await fund(app.api, b.userId, 100)
    const a1 = await createAddress(app.api, a.apiKey, unique("audit-a1"))
    await createAddress(app.api, a.apiKey, unique("audit-a2"))
    const b1 = await createAddress(app.api, b.apiKey, unique("audit-b1"))
    for (const to of [a1.email, a1.email, b1.email]) {
      const sent = await sendRaw(app.mx, { from: "alice@sender.example", to: [to], raw: plainMessage({ to }) })
      expect(sent.data?.code).toBe(250)
    }
    await patch(a.apiKey, { pdpc_registered: true, pdpc_certificate_number: "C-1", pdpc_registered_at: "2026-01-15" })
    const r = await app.api.call("GET", "/api/compliance/audit-export", { token: a.apiKey })
    expect(r.status).toBe(200)
    expect(r.body.data).toEqual({
      account_id: a.userId,
      pdpc_registered: true,
      pdpc_certificate_number: "C-1",
      pdpc_registered_at: "2026-01-15",
      default_retention_days: 30,
      address_count: 2,
      message_count: 2,
      generated_at: expect.stringMatching(/Z$/),
    })
    const rb = await app.api.call("GET", "/api/compliance/audit-export", { token: b.apiKey })
    expect(rb.body.data).toMatchObject({ account_id: b.userId, address_count: 1, message_count: 1, pdpc_registered: false })
  })
})
