import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessage, storeMessageEffect } from "../support/inbound-fixtures.ts"
import { smsWorkerSpec } from "../../src/workers/sms.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { makeSmsProvider } from "../support/sms-provider.ts"

const provider = makeSmsProvider()
let api: TestApp
let me: TestAccount
let other: TestAccount
let addressId: number
let othersAddressId: number

beforeAll(async () => {
  api = await makeTestApp({ workers: false, settings: provider.settings, infrastructure: provider.layer })
  me = await createAccount(api)
  other = await createAccount(api)
  addressId = await createAddress(api, me.userId)
  othersAddressId = await createAddress(api, other.userId)
})
afterAll(() => api?.stop())

const KEY = "sk_live_4f9a2c7e1b3d5a6f8e0c"
const create = (body: unknown, token = me.apiKey, app = api) => app.call("POST", "/api/sms/notifications", { token, body })

describe("POST /api/sms/notifications", () => {
  it("creates a rule with a normalized phone; the key is shown once, lists show its prefix", async () => {
    const addr = await createAddress(api, me.userId)
    const res = await create({ address_id: addr, phone_number: "0712345678", provider_key: KEY })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({
      address_id: addr,
      phone_number: "+255712345678",
      provider_key: KEY,
      provider_key_prefix: KEY.slice(0, 8),
      is_active: true,
      revoked_at: null,
    })
    expect(Object.keys(res.body.data).sort()).toEqual(
      ["address_id", "created_at", "id", "is_active", "phone_number", "provider_key", "provider_key_prefix", "revoked_at"],
    )
    const list = await api.call("GET", `/api/sms/notifications?address_id=${addr}`, { token: me.apiKey })
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(1)
    expect(list.body.data[0]).not.toHaveProperty("provider_key")
    expect(list.body.data[0].provider_key_prefix).toBe(KEY.slice(0, 8))
    const [row] = await api.run(Database.use((db) =>
      db.query<{ provider_key_sealed: string }>("SELECT provider_key_sealed FROM sms_rules WHERE id = $1", [res.body.data.id])
    ))
    expect(row!.provider_key_sealed).not.toContain(KEY)
  })

  it.each([
    "12345",
    "+255812345678",
    "0812345678",
    "0712 345 678",
    "+2557123456789",
    "+254712345678",
    "",
  ])("refuses the phone number %j with 400 on phone_number", async (phone) => {
    const res = await create({ address_id: addressId, phone_number: phone, provider_key: KEY })
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field: "phone_number", code: "VALIDATION_ERROR" })
  })

  it("refuses a missing or blank provider key", async () => {
    const missing = await create({ address_id: addressId, phone_number: "+255712345678" })
    expect(missing.status).toBe(400)
    expect(missing.body.errors[0].field).toBe("provider_key")
    const spaced = await create({ address_id: addressId, phone_number: "+255712345678", provider_key: "has a space" })
    expect(spaced.status).toBe(400)
  })

  it("answers 403 for another account's address and 404 for an unknown one", async () => {
    const foreign = await create({ address_id: othersAddressId, phone_number: "+255712345678", provider_key: KEY })
    expect(foreign.status).toBe(403)
    expect(foreign.body.errors[0].code).toBe("FORBIDDEN")
    expect((await create({ address_id: 999_999, phone_number: "+255712345678", provider_key: KEY })).status).toBe(404)
    expect((await api.call("GET", `/api/sms/notifications?address_id=${othersAddressId}`, { token: me.apiKey })).status).toBe(403)
  })

  it("refuses a second active rule for the same address and phone (409), allows it after revoking", async () => {
    const addr = await createAddress(api, me.userId)
    const first = await create({ address_id: addr, phone_number: "+255687654321", provider_key: KEY })
    expect(first.status).toBe(201)
    const dup = await create({ address_id: addr, phone_number: "0687654321", provider_key: KEY })
    expect(dup.status).toBe(409)
    expect(dup.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "phone_number" })
    await api.call("POST", `/api/sms/notifications/${first.body.data.id}/revoke`, { token: me.apiKey })
    expect((await create({ address_id: addr, phone_number: "0687654321", provider_key: KEY })).status).toBe(201)
  })

  it("an address has at most 10 active rules: the next is 409 LIMIT_REACHED, revoking one frees its slot", async () => {
    const addr = await createAddress(api, me.userId)
    const phone = (i: number) => `+2556870000${String(i).padStart(2, "0")}`
    const made: Array<number> = []
    for (let i = 0; i < 9; i++) {
      const r = await create({ address_id: addr, phone_number: phone(i), provider_key: KEY })
      expect(r.status, JSON.stringify(r.body)).toBe(201)
      made.push(r.body.data.id)
    }
    // Two at once cannot both take the last slot.
    const both = await Promise.all([10, 11].map((i) => create({ address_id: addr, phone_number: phone(i), provider_key: KEY })))
    expect(both.map((r) => r.status).sort()).toEqual([201, 409])
    expect(both.find((r) => r.status === 409)!.body.errors[0]).toMatchObject({ code: "LIMIT_REACHED" })
    // Another address of the account is not affected.
    expect((await create({ address_id: await createAddress(api, me.userId), phone_number: phone(12), provider_key: KEY })).status).toBe(201)
    await api.call("POST", `/api/sms/notifications/${made[0]}/revoke`, { token: me.apiKey })
    expect((await create({ address_id: addr, phone_number: phone(13), provider_key: KEY })).status).toBe(201)
  })

  it("needs the sms scope", async () => {
    const narrow = await createAccount(api, { scopes: "webhooks" })
    const addr = await createAddress(api, narrow.userId)
    expect((await create({ address_id: addr, phone_number: "+255712345678", provider_key: KEY }, narrow.apiKey)).status).toBe(403)
    const scoped = await createAccount(api, { scopes: "sms" })
    const addr2 = await createAddress(api, scoped.userId)
    expect((await create({ address_id: addr2, phone_number: "+255712345678", provider_key: KEY }, scoped.apiKey)).status).toBe(201)
  })

  it.each([
    ["no SMS provider", {}],
    // The log stand-in chosen explicitly while a URL is set: nothing leaves, so nothing may read as sent.
    ["SMS_PROVIDER=log beside an SMS_API_URL", { ...provider.settings, smsProvider: "log" as const }],
  ])("creates rules on a server with %s (sends then fail, recorded per delivery)", async (_case, settings) => {
    // DECISIONS lists the SMS rule among created resources (201); only sending needs the provider.
    const before = provider.requests.length
    const bare = await makeTestApp({ workers: false, settings, infrastructure: provider.layer })
    const acct = await createAccount(bare)
    const addr = await createAddress(bare, acct.userId)
    const res = await create({ address_id: addr, phone_number: "+255712345678", provider_key: KEY }, acct.apiKey, bare)
    const listed = await bare.call("GET", `/api/sms/notifications?address_id=${addr}`, { token: acct.apiKey })
    const rows = await bare.run(Effect.gen(function*() {
      yield* storeMessageEffect({ userId: acct.userId, addressId: addr, from: "a@example.co.tz", subject: "Hi", text: "x" })
      yield* runOnce(yield* smsWorkerSpec())
      return yield* Database.use((db) => db.query<{ status: string; last_error: string }>("SELECT status, last_error FROM sms_deliveries WHERE rule_id = $1", [res.body.data.id]))
    }))
    await bare.stop()
    expect(res.status).toBe(201)
    expect(listed.body.data.map((r: { id: number }) => r.id)).toEqual([res.body.data.id])
    expect(rows).toEqual([{ status: "failed", last_error: expect.stringContaining("not configured") }])
    expect(provider.requests.length).toBe(before)
  })
})

describe("revoke and deliveries", () => {
  it("revokes once (idempotent), only for the owner", async () => {
    const addr = await createAddress(api, me.userId)
    const rule = (await create({ address_id: addr, phone_number: "+255712345678", provider_key: KEY })).body.data
    expect((await api.call("POST", `/api/sms/notifications/${rule.id}/revoke`, { token: other.apiKey })).status).toBe(403)
    const res = await api.call("POST", `/api/sms/notifications/${rule.id}/revoke`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ id: rule.id, is_active: false })
    expect(res.body.data.revoked_at).toMatch(/Z$/)
    expect(res.body.data).not.toHaveProperty("provider_key")
    const again = await api.call("POST", `/api/sms/notifications/${rule.id}/revoke`, { token: me.apiKey })
    expect(again.body.data.revoked_at).toBe(res.body.data.revoked_at)
    expect((await api.call("POST", "/api/sms/notifications/999999/revoke", { token: me.apiKey })).status).toBe(404)
  })

  it("lists deliveries with the documented fields; another account gets 403", async () => {
    const addr = await createAddress(api, me.userId)
    const rule = (await create({ address_id: addr, phone_number: "+255712345678", provider_key: KEY })).body.data
    const message = await storeMessage(api, { userId: me.userId, addressId: addr })
    const res = await api.call("GET", `/api/sms/notifications/${rule.id}/deliveries`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toHaveLength(1)
    expect(res.body.data[0]).toMatchObject({
      rule_id: rule.id,
      message_id: message.id,
      status: "pending",
      attempt: 0,
      provider_message_id: null,
      last_error: null,
      sent_at: null,
    })
    expect(Object.keys(res.body.data[0]).sort()).toEqual(
      ["attempt", "created_at", "id", "last_error", "message_id", "provider_message_id", "rule_id", "sent_at", "status"],
    )
    expect((await api.call("GET", `/api/sms/notifications/${rule.id}/deliveries`, { token: other.apiKey })).status).toBe(403)
  })
})
