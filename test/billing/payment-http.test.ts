import { Option } from "effect"
import { http, HttpResponse } from "msw"
import { setupServer } from "msw/node"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { balanceOf, eventBody, expectLedgerConsistent, postEvent, query } from "./support.ts"

const GATEWAY = "https://pay.gateway.test/v1"
const KEY = "pk_live_test_123"

interface Seen {
  readonly path: string
  readonly authorization: string | null
  readonly contentType: string | null
  readonly body: Record<string, unknown>
}
let seen: Array<Seen> = []

const record = async (request: Request) => {
  seen.push({
    path: new URL(request.url).pathname,
    authorization: request.headers.get("authorization"),
    contentType: request.headers.get("content-type"),
    body: (await request.json()) as Record<string, unknown>,
  })
}

const server = setupServer(
  http.post(`${GATEWAY}/checkout`, async ({ request }) => {
    await record(request)
    const body = seen.at(-1)!.body
    return HttpResponse.json({
      checkout_url: `https://pay.gateway.test/c/${body.reference}`,
      payment_link_url: `https://pay.gateway.test/l/${body.reference}`,
      reference: `gw_${body.reference}`,
    })
  }),
  http.post(`${GATEWAY}/ussd-push`, async ({ request }) => {
    await record(request)
    return HttpResponse.json({ reference: `gw_push_${seen.at(-1)!.body.reference}` })
  }),
)

let api: TestApp
beforeAll(async () => {
  // Requests to the test app itself are not the gateway's: let them through.
  server.listen({ onUnhandledFrame: "bypass" })
  api = await makeTestApp({
    workers: false,
    settings: { paymentApiUrl: Option.some(GATEWAY), paymentApiKey: Option.some(KEY), baseUrl: "https://api.example.co.tz" },
  })
})
afterEach(() => {
  server.resetHandlers()
  seen = []
})
afterAll(async () => {
  server.close()
  await expectLedgerConsistent(api)
  await api.stop()
})

const topupRow = (id: number) =>
  query<{ status: string; failure_reason: string | null; provider_reference: string | null }>(
    api,
    "SELECT status, failure_reason, provider_reference FROM topups WHERE id = $1",
    [id],
  ).then((rows) => rows[0]!)

describe("live payment gateway (PAYMENT_API_URL)", () => {
  it("creates a checkout per the wire contract and answers the gateway's links", async () => {
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 25000 } })
    expect(res.status).toBe(201)
    expect(seen).toHaveLength(1)
    const call = seen[0]!
    expect(call.path).toBe("/v1/checkout")
    expect(call.authorization).toBe(`Bearer ${KEY}`)
    expect(call.contentType).toMatch(/^application\/json/)
    expect(call.body).toEqual({
      amount: 25000,
      currency: "TZS",
      reference: expect.stringMatching(/^top_[0-9a-f]{24}$/),
      expires_at: res.body.data.topup.expires_at,
      callback_url: "https://api.example.co.tz/api/billing/payments/events",
    })
    const ref = call.body.reference as string
    expect(res.body.data).toMatchObject({
      checkout_url: `https://pay.gateway.test/c/${ref}`,
      payment_link_url: `https://pay.gateway.test/l/${ref}`,
      provider_reference: `gw_${ref}`,
      topup: { status: "pending", provider_reference: `gw_${ref}` },
    })
    // The gateway's event for that reference completes it.
    const done = await postEvent(api, eventBody({ provider_reference: `gw_${ref}`, amount_tzs: 25000 }))
    expect(done.body.data.outcome).toBe("applied")
    expect(await balanceOf(api, account)).toBe(25000)
  })

  it("uses the checkout link as payment link when the gateway gives only one", async () => {
    server.use(http.post(`${GATEWAY}/checkout`, () => HttpResponse.json({ checkout_url: "https://pay.gateway.test/c/1", reference: "gw_single" })))
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 2000 } })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ checkout_url: "https://pay.gateway.test/c/1", payment_link_url: "https://pay.gateway.test/c/1" })
  })

  it("sends a USSD push to the verified phone", async () => {
    const account = await createAccount(api, { phone: "+255687000001", phoneVerified: true })
    const res = await api.call("POST", "/api/billing/topup/phone", { token: account.apiKey, body: { amount_tzs: 3000 } })
    expect(res.status).toBe(201)
    expect(seen[0]).toMatchObject({
      path: "/v1/ussd-push",
      authorization: `Bearer ${KEY}`,
      body: { amount: 3000, currency: "TZS", phone_number: "+255687000001", reference: expect.stringMatching(/^top_/) },
    })
    expect(res.body.data.provider_reference).toBe(`gw_push_${seen[0]!.body.reference}`)
  })

  const failures: Array<[string, () => Response | Promise<Response>]> = [
    ["a 500", () => HttpResponse.json({ error: "database on fire at 10.0.0.3" }, { status: 500 })],
    ["a 401 (bad key)", () => HttpResponse.json({ error: "invalid key" }, { status: 401 })],
    ["a reply that is not JSON", () => new HttpResponse("<html>gateway</html>", { status: 200 })],
    ["a reply without reference", () => HttpResponse.json({ checkout_url: "https://x" })],
  ]
  it.each(failures)("answers 502 PROVIDER_ERROR on %s and leaves the top-up failed, not pending", async (_, reply) => {
    server.use(http.post(`${GATEWAY}/checkout`, reply))
    const account = await createAccount(api)
    const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 5000 } })
    expect(res.status).toBe(502)
    expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
    // The gateway's own words never reach the customer.
    expect(JSON.stringify(res.body)).not.toMatch(/10\.0\.0\.3|invalid key|<html>/)
    const rows = await query<{ id: number }>(api, "SELECT id FROM topups WHERE user_id = $1", [account.userId])
    expect(rows).toHaveLength(1)
    expect(await topupRow(rows[0]!.id)).toEqual({ status: "failed", failure_reason: "gateway_error", provider_reference: null })
  })

  it("answers 502 and fails the top-up when the USSD push is refused", async () => {
    server.use(http.post(`${GATEWAY}/ussd-push`, () => HttpResponse.json({ error: "subscriber unreachable" }, { status: 422 })))
    const account = await createAccount(api, { phone: "+255687000002", phoneVerified: true })
    const res = await api.call("POST", "/api/billing/topup/phone", { token: account.apiKey, body: { amount_tzs: 3000 } })
    expect(res.status).toBe(502)
    const [row] = await query<{ status: string }>(api, "SELECT status FROM topups WHERE user_id = $1", [account.userId])
    expect(row!.status).toBe("failed")
  })

  it("fails the new top-up when the gateway reuses a reference it already gave", async () => {
    server.use(http.post(`${GATEWAY}/checkout`, () => HttpResponse.json({ checkout_url: "https://x/c", reference: "gw_same" })))
    const account = await createAccount(api)
    expect((await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 2000 } })).status).toBe(201)
    const second = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 2000 } })
    expect(second.status).toBe(502)
    const statuses = await query<{ status: string }>(api, "SELECT status FROM topups WHERE user_id = $1 ORDER BY id", [account.userId])
    expect(statuses.map((s) => s.status)).toEqual(["pending", "failed"])
  })

  it("turns the fake gateway's pages off", async () => {
    const res = await api.call("GET", "/fake-gateway/checkout/fake_000000000000000000000000")
    expect(res.status).toBe(404)
  })
})

describe("live payment gateway, misconfigured or unreachable", () => {
  it("answers 502 when the gateway cannot be reached at all", async () => {
    // Port 9 on loopback: nothing listens, the connection is refused (a real network error).
    const down = await makeTestApp({
      workers: false,
      settings: { paymentApiUrl: Option.some("http://127.0.0.1:9"), paymentApiKey: Option.some(KEY) },
    })
    try {
      const account = await createAccount(down)
      const res = await down.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 2000 } })
      expect(res.status).toBe(502)
      expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
      const [row] = await query<{ status: string }>(down, "SELECT status FROM topups WHERE user_id = $1", [account.userId])
      expect(row!.status).toBe("failed")
    } finally {
      await down.stop()
    }
  })

  it("answers 503 NOT_CONFIGURED and fails the top-up", async () => {
    const bare = await makeTestApp({ workers: false, settings: { paymentApiUrl: Option.some(GATEWAY) } })
    try {
      const account = await createAccount(bare)
      const res = await bare.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: 2000 } })
      expect(res.status).toBe(503)
      expect(res.body.errors[0].code).toBe("NOT_CONFIGURED")
      expect(seen).toEqual([])
      const [row] = await query<{ status: string }>(bare, "SELECT status FROM topups WHERE user_id = $1", [account.userId])
      expect(row!.status).toBe("failed")
    } finally {
      await bare.stop()
    }
  })
})
