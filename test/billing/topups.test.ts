import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { Topups } from "../../effects/billing/topups.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { balanceOf, createTopup, expectLedgerConsistent, query } from "./support.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(async () => {
  await expectLedgerConsistent(api)
  await api.stop()
})

describe("GET /api/billing/balance", () => {
  it("answers 0 for a new account and follows the ledger", async () => {
    const account = await createAccount(api)
    expect(await balanceOf(api, account)).toBe(0)
    await api.run(Billing.use((b) => b.credit({ userId: account.userId, amount: 1234, kind: "adjustment", reference: { type: "operator" } })))
    const res = await api.call("GET", "/api/billing/balance", { token: account.apiKey })
    expect(res.body).toMatchObject({ success: true, data: { balance_tzs: 1234 } })
  })

  it("needs credentials and the billing:read scope", async () => {
    expect((await api.call("GET", "/api/billing/balance")).status).toBe(401)
    const narrow = await createAccount(api, { scopes: "inbound:read" })
    const res = await api.call("GET", "/api/billing/balance", { token: narrow.apiKey })
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("FORBIDDEN")
    const reader = await createAccount(api, { scopes: "billing:read" })
    expect((await api.call("GET", "/api/billing/balance", { token: reader.apiKey })).status).toBe(200)
  })

  it("accepts a JWT access token too", async () => {
    const account = await createAccount(api)
    expect((await api.call("GET", "/api/billing/balance", { token: account.token })).status).toBe(200)
  })
})

describe("POST /api/billing/topup", () => {
  it("creates a pending top-up with a checkout link valid 1 hour", async () => {
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 2000 } })
    expect(res.status).toBe(201)
    const { topup, checkout_url, payment_link_url, provider_reference } = res.body.data
    expect(topup).toMatchObject({
      user_id: account.userId,
      amount_tzs: 2000,
      status: "pending",
      channel: "checkout",
      provider_reference,
      completed_at: null,
    })
    expect(Number.isInteger(topup.id)).toBe(true)
    expect(Date.parse(topup.expires_at) - Date.parse(topup.created_at)).toBe(60 * 60 * 1000)
    expect(checkout_url).toBe(`${api.settings.baseUrl}/fake-gateway/checkout/${provider_reference}`)
    expect(payment_link_url).toBe(checkout_url)
    // Creating a top-up moves no money.
    expect(await balanceOf(api, account)).toBe(0)
  })

  it("is allowed before identity verification", async () => {
    const account = await createAccount(api, { emailVerified: false, phoneVerified: false })
    await createTopup(api, account, 2500)
  })

  it("needs billing:write (billing:read is not enough)", async () => {
    const reader = await createAccount(api, { scopes: "billing:read" })
    const res = await api.call("POST", "/api/billing/topup", { token: reader.apiKey, body: { amount_tzs: 5000 } })
    expect(res.status).toBe(403)
    const writer = await createAccount(api, { scopes: "billing:write" })
    expect((await api.call("POST", "/api/billing/topup", { token: writer.apiKey, body: { amount_tzs: 5000 } })).status).toBe(201)
    expect((await api.call("POST", "/api/billing/topup", { body: { amount_tzs: 5000 } })).status).toBe(401)
  })

  const bad: Array<[string, unknown]> = [
    ["below the minimum", 1999],
    ["zero", 0],
    ["negative", -5000],
    ["a fraction", 2000.5],
    ["above 10^9", 1_000_000_001],
    ["huge", 1e20],
    ["a numeric string", "5000"],
    ["a word", "lots"],
    ["null", null],
    ["a boolean", true],
    ["an object", { value: 5000 }],
  ]
  it.each(bad)("refuses an amount that is %s with 400 on amount_tzs", async (_, amount) => {
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: amount } })
    expect(res.status).toBe(400)
    expect(res.body.success).toBe(false)
    expect(res.body.errors).toContainEqual(expect.objectContaining({ field: "amount_tzs", code: "VALIDATION_ERROR" }))
    expect(await query(api, "SELECT id FROM topups WHERE user_id = $1", [account.userId])).toEqual([])
  })

  it("refuses a missing amount, an empty body and malformed JSON", async () => {
    const account = await createAccount(api)
    const missing = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body.errors).toContainEqual(expect.objectContaining({ field: "amount_tzs", code: "VALIDATION_ERROR" }))
    const empty = await api.call("POST", "/api/billing/topup", { token: account.apiKey })
    expect(empty.status).toBe(400)
    const malformed = await api.call("POST", "/api/billing/topup", {
      token: account.apiKey,
      rawBody: "{amount_tzs: 5000",
      headers: { "content-type": "application/json" },
    })
    expect(malformed.status).toBe(400)
    expect(malformed.body.errors[0]).toMatchObject({ field: "body", code: "VALIDATION_ERROR" })
  })

  it("accepts the bounds exactly: 2000 and 10^9", async () => {
    const account = await createAccount(api)
    await createTopup(api, account, 2000)
    await createTopup(api, account, 1_000_000_000)
  })

  it("the service refuses bad amounts too (callers other than HTTP)", async () => {
    const account = await createAccount(api)
    for (const amount of [1999, 2000.5, -1, Number.NaN, 2e9]) {
      const e = await api.run(Effect.flip(Topups.use((t) => t.create(account.userId, amount))))
      expect(e._tag).toBe("ValidationError")
    }
  })

  it("takes the checkout expiry from the Clock: created + 1 hour", async () => {
    const account = await createAccount(api)
    const at = Date.parse("2030-01-01T10:00:00.000Z")
    const { topup } = await api.run(
      Effect.gen(function*() {
        yield* TestClock.setTime(at)
        return yield* Topups.use((t) => t.create(account.userId, 3000))
      }).pipe(Effect.provide(TestClock.layer())),
    )
    expect(topup.created_at.toISOString()).toBe("2030-01-01T10:00:00.000Z")
    expect(topup.expires_at.toISOString()).toBe("2030-01-01T11:00:00.000Z")
  })
})

describe("POST /api/billing/topup/phone", () => {
  it("needs a verified phone: 400 on phone_number otherwise, nothing stored", async () => {
    const account = await createAccount(api, { phone: "+255712000001", phoneVerified: false })
    const res = await api.call("POST", "/api/billing/topup/phone", { token: account.apiKey, body: { amount_tzs: 5000 } })
    expect(res.status).toBe(400)
    expect(res.body.errors).toContainEqual(expect.objectContaining({ field: "phone_number", code: "VALIDATION_ERROR" }))
    const noPhone = await createAccount(api)
    const res2 = await api.call("POST", "/api/billing/topup/phone", { token: noPhone.apiKey, body: { amount_tzs: 5000 } })
    expect(res2.status).toBe(400)
    expect(await query(api, "SELECT id FROM topups WHERE user_id IN ($1, $2)", [account.userId, noPhone.userId])).toEqual([])
  })

  it("pushes to the verified phone and answers a pending top-up", async () => {
    const account = await createAccount(api, { phone: "+255712000002", phoneVerified: true })
    const res = await api.call("POST", "/api/billing/topup/phone", { token: account.apiKey, body: { amount_tzs: 5000 } })
    expect(res.status).toBe(201)
    expect(res.body.data.topup).toMatchObject({ amount_tzs: 5000, status: "pending", channel: "ussd_push" })
    expect(res.body.data.provider_reference).toBe(res.body.data.topup.provider_reference)
    const [fake] = await query<{ phone_number: string; amount_tzs: number }>(
      api,
      "SELECT phone_number, amount_tzs FROM fake_gateway_payments WHERE provider_reference = $1",
      [res.body.data.provider_reference],
    )
    expect(fake).toEqual({ phone_number: "+255712000002", amount_tzs: 5000 })
  })

  it("accepts the verified phone in either form, refuses any other number", async () => {
    const account = await createAccount(api, { phone: "+255712000003", phoneVerified: true })
    const same = await api.call("POST", "/api/billing/topup/phone", {
      token: account.apiKey,
      body: { amount_tzs: 5000, phone_number: "0712000003" },
    })
    expect(same.status).toBe(201)
    const other = await api.call("POST", "/api/billing/topup/phone", {
      token: account.apiKey,
      body: { amount_tzs: 5000, phone_number: "+255712999999" },
    })
    expect(other.status).toBe(400)
    expect(other.body.errors[0]).toMatchObject({ field: "phone_number" })
    const malformed = await api.call("POST", "/api/billing/topup/phone", {
      token: account.apiKey,
      body: { amount_tzs: 5000, phone_number: "12345" },
    })
    expect(malformed.status).toBe(400)
    expect(malformed.body.errors[0]).toMatchObject({ field: "phone_number" })
  })

  it("validates the amount like a checkout top-up", async () => {
    const account = await createAccount(api, { phone: "+255712000004", phoneVerified: true })
    for (const amount_tzs of [1999, "5000", 2000.5, -1, 1e10, undefined]) {
      const res = await api.call("POST", "/api/billing/topup/phone", { token: account.apiKey, body: { amount_tzs } })
      expect(res.status).toBe(400)
      expect(res.body.errors).toContainEqual(expect.objectContaining({ field: "amount_tzs" }))
    }
  })
})

describe("GET /api/billing/topups", () => {
  it("lists the account's own top-ups newest first, and shows one by id", async () => {
    const account = await createAccount(api)
    const other = await createAccount(api)
    const first = await createTopup(api, account, 2000)
    const second = await createTopup(api, account, 3000)
    await createTopup(api, other, 4000)
    const list = await api.call("GET", "/api/billing/topups?per_page=1", { token: account.apiKey })
    expect(list.status).toBe(200)
    expect(list.body.data.map((t: { id: number }) => t.id)).toEqual([second.topup.id])
    expect(list.body.pagination).toEqual({ page: 1, per_page: 1, total: 2, total_pages: 2 })
    const one = await api.call("GET", `/api/billing/topups/${first.topup.id}`, { token: account.apiKey })
    expect(one.body.data).toMatchObject({ id: first.topup.id, amount_tzs: 2000, status: "pending" })
    expect((await api.call("GET", `/api/billing/topups/${first.topup.id}`, { token: other.apiKey })).status).toBe(403)
    expect((await api.call("GET", "/api/billing/topups/999999", { token: account.apiKey })).status).toBe(404)
  })
})

describe("GET /api/billing/transactions", () => {
  it("lists ledger entries newest first with pagination", async () => {
    const account = await createAccount(api)
    await api.run(Effect.gen(function*() {
      const billing = yield* Billing
      yield* billing.credit({ userId: account.userId, amount: 2000, kind: "credit", reference: { type: "topup", id: 77 }, description: "Top-up" })
      for (let i = 1; i <= 3; i++) yield* billing.charge({ userId: account.userId, amount: 5, reference: { type: "outbound_message", id: i } })
      yield* billing.refund({ userId: account.userId, amount: 5, reference: { type: "outbound_message", id: 3 } })
    }))
    const page1 = await api.call("GET", "/api/billing/transactions?per_page=2", { token: account.apiKey })
    expect(page1.status).toBe(200)
    expect(page1.body.pagination).toEqual({ page: 1, per_page: 2, total: 5, total_pages: 3 })
    expect(page1.body.data[0]).toEqual({
      id: expect.any(Number),
      kind: "refund",
      amount_tzs: 5,
      balance_after_tzs: 1990,
      reference_type: "outbound_message",
      reference_id: "3",
      description: "",
      created_at: expect.stringMatching(/Z$/),
    })
    expect(page1.body.data[1]).toMatchObject({ kind: "debit", amount_tzs: -5, balance_after_tzs: 1985 })
    const page3 = await api.call("GET", "/api/billing/transactions?per_page=2&page=3", { token: account.apiKey })
    expect(page3.body.data).toEqual([expect.objectContaining({ kind: "credit", amount_tzs: 2000, balance_after_tzs: 2000, reference_id: "77" })])
    const all = await api.call("GET", "/api/billing/transactions", { token: account.apiKey })
    expect(all.body.data.reduce((s: number, e: { amount_tzs: number }) => s + e.amount_tzs, 0)).toBe(await balanceOf(api, account))
  })

  it("shows nothing of other accounts, checks paging and scope", async () => {
    const account = await createAccount(api)
    const empty = await api.call("GET", "/api/billing/transactions", { token: account.apiKey })
    expect(empty.body.data).toEqual([])
    expect(empty.body.pagination).toEqual({ page: 1, per_page: 20, total: 0, total_pages: 0 })
    for (const q of ["page=0", "per_page=101", "per_page=abc"]) {
      const res = await api.call("GET", `/api/billing/transactions?${q}`, { token: account.apiKey })
      expect(res.status).toBe(400)
    }
    const narrow = await createAccount(api, { scopes: "billing:write" })
    expect((await api.call("GET", "/api/billing/transactions", { token: narrow.apiKey })).status).toBe(403)
  })
})
