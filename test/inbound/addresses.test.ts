import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { sendRaw } from "../support/smtp-client.ts"
import { countMessages, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp, unique } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const post = (apiKey: string, body: unknown) => app.api.call("POST", "/api/inbound/addresses", { token: apiKey, body })

describe("POST /api/inbound/addresses", () => {
  it("creates an address on the platform domain with the InboundAddress fields", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const local = unique("info")
    const r = await post(apiKey, { local_part: local, label: "Support" })
    expect(r.status).toBe(201)
    expect(r.body.success).toBe(true)
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      user_id: userId,
      local_part: local,
      label: "Support",
      domain_id: null,
      email: `${local}@inbox.localhost`,
      retention_days: 30,
      created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T.*Z$/),
    })
    const list = await app.api.call("GET", "/api/inbound/addresses", { token: apiKey })
    expect(list.status).toBe(200)
    expect(list.body.data).toEqual([r.body.data])
  })

  it("refuses local parts outside 1..64 of [a-z0-9-] with 400 and the field, without lowercasing", async () => {
    const { apiKey } = await createAccount(app.api)
    for (const local_part of ["Info", "", "a_b", "a.b", "x".repeat(65), "ñame", "a b", 42, null]) {
      const r = await post(apiKey, { local_part })
      expect(r.status, String(local_part)).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field: "local_part", code: "VALIDATION_ERROR" })
    }
    expect((await post(apiKey, {})).body.errors[0]).toMatchObject({ field: "local_part" })
    expect((await post(apiKey, { local_part: "x".repeat(64) })).status).toBe(201)
  })

  it("keeps local parts unique per domain across accounts (409 CONFLICT)", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const local = unique("sales")
    expect((await post(a.apiKey, { local_part: local })).status).toBe(201)
    const again = await post(b.apiKey, { local_part: local })
    expect(again.status).toBe(409)
    expect(again.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "local_part" })
    expect((await post(a.apiKey, { local_part: local })).status).toBe(409)
  })

  it("refuses reserved role names with 409 CONFLICT", async () => {
    const { apiKey } = await createAccount(app.api)
    for (const local_part of ["postmaster", "abuse", "hostmaster", "webmaster", "mailer-daemon", "root"]) {
      const r = await post(apiKey, { local_part })
      expect(r.status).toBe(409)
      expect(r.body.errors[0].code).toBe("CONFLICT")
    }
  })

  it("requires a verified email or phone (403 FORBIDDEN)", async () => {
    const unverified = await createAccount(app.api, { emailVerified: false })
    const r = await post(unverified.apiKey, { local_part: unique("nope") })
    expect(r.status).toBe(403)
    expect(r.body.errors[0].code).toBe("FORBIDDEN")
    const phoneOnly = await createAccount(app.api, { emailVerified: false, phoneVerified: true })
    expect((await post(phoneOnly.apiKey, { local_part: unique("phone") })).status).toBe(201)
  })

  it("caps an account at 100 addresses (409 LIMIT_REACHED), also under concurrent creates", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const prefix = unique("cap")
    const results = await Promise.all(Array.from({ length: 104 }, (_, i) => post(apiKey, { local_part: `${prefix}-${i}` })))
    expect(results.filter((r) => r.status === 201)).toHaveLength(100)
    const refused = results.filter((r) => r.status !== 201)
    expect(refused).toHaveLength(4)
    for (const r of refused) expect(r.body.errors[0].code).toBe("LIMIT_REACHED")
    const [row] = await query<{ n: number }>(app.api, "SELECT count(*)::int8 AS n FROM inbound_addresses WHERE user_id = $1", [userId])
    expect(row!.n).toBe(100)
  })

  it("checks domain_id: unknown 404, another account's 403, not verified 403, wrong type 400", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    expect((await post(a.apiKey, { local_part: unique("d"), domain_id: 999999 })).status).toBe(404)
    const dom = await app.api.call("POST", "/api/inbound/domains", { token: b.apiKey, body: { domain: `${unique("b")}.example.co.tz` } })
    expect(dom.status).toBe(201)
    const other = await post(a.apiKey, { local_part: unique("d"), domain_id: dom.body.data.id })
    expect(other.status).toBe(403)
    expect(other.body.errors[0].code).toBe("FORBIDDEN")
    const pending = await post(b.apiKey, { local_part: unique("d"), domain_id: dom.body.data.id })
    expect(pending.status).toBe(403)
    const bad = await post(a.apiKey, { local_part: unique("d"), domain_id: "abc" })
    expect(bad.status).toBe(400)
    expect(bad.body.errors[0].field).toBe("domain_id")
    expect((await post(a.apiKey, { local_part: unique("d"), domain_id: 0 })).status).toBe(400)
  })

  it("needs inbound:write to create and inbound:read to list", async () => {
    const reader = await createAccount(app.api, { scopes: "inbound:read" })
    const r = await post(reader.apiKey, { local_part: unique("r") })
    expect(r.status).toBe(403)
    expect((await app.api.call("GET", "/api/inbound/addresses", { token: reader.apiKey })).status).toBe(200)
    const writer = await createAccount(app.api, { scopes: "inbound:write" })
    expect((await post(writer.apiKey, { local_part: unique("w") })).status).toBe(201)
    expect((await app.api.call("GET", "/api/inbound/addresses", { token: writer.apiKey })).status).toBe(403)
    expect((await app.api.call("GET", "/api/inbound/addresses")).status).toBe(401)
  })

  it("takes retention_days from the compliance profile at creation", async () => {
    const { apiKey } = await createAccount(app.api)
    const before = await createAddress(app.api, apiKey, unique("before"))
    expect(before.retention_days).toBe(30)
    const p = await app.api.call("PATCH", "/api/compliance/profile", { token: apiKey, body: { default_retention_days: 7 } })
    expect(p.status).toBe(200)
    expect((await createAddress(app.api, apiKey, unique("after"))).retention_days).toBe(7)
    const list = await app.api.call("GET", "/api/inbound/addresses", { token: apiKey })
    expect(list.body.data.find((a: { id: number }) => a.id === before.id).retention_days).toBe(30)
  })
})

describe("DELETE /api/inbound/addresses/:id", () => {
  it("deletes the address and its messages, and mail to it stops routing at once", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 100)
    const address = await createAddress(app.api, apiKey, unique("gone"))
    const sent = await sendRaw(app.mx, { from: "alice@sender.example", to: [address.email], raw: plainMessage({ to: address.email }) })
    expect(sent.data?.code).toBe(250)
    const [msg] = await query<{ id: number; mime_id: number }>(app.api, "SELECT id, mime_id FROM inbound_messages WHERE address_id = $1", [address.id])
    expect(await countMessages(app.api, userId)).toBe(1)

    const del = await app.api.call("DELETE", `/api/inbound/addresses/${address.id}`, { token: apiKey })
    expect(del.status).toBe(200)
    expect(await countMessages(app.api, userId)).toBe(0)
    expect(await query(app.api, "SELECT id FROM inbound_mime WHERE id = $1", [msg!.mime_id])).toHaveLength(0)
    expect((await app.api.call("GET", `/api/inbound/messages/${msg!.id}`, { token: apiKey })).status).toBe(404)
    const again = await sendRaw(app.mx, { from: "alice@sender.example", to: [address.email], raw: plainMessage() })
    expect(again.rcpts[0]!.code).toBe(550)
    expect((await app.api.call("DELETE", `/api/inbound/addresses/${address.id}`, { token: apiKey })).status).toBe(404)
  })

  it("refuses another account's address with 403 and leaves it alone", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const address = await createAddress(app.api, a.apiKey, unique("mine"))
    const r = await app.api.call("DELETE", `/api/inbound/addresses/${address.id}`, { token: b.apiKey })
    expect(r.status).toBe(403)
    expect(r.body.errors[0].code).toBe("FORBIDDEN")
    expect((await app.api.call("GET", "/api/inbound/addresses", { token: a.apiKey })).body.data).toHaveLength(1)
    expect((await app.api.call("DELETE", "/api/inbound/addresses/abc", { token: a.apiKey })).status).toBe(400)
  })
})
