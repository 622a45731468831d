/**
 * Acceptance: SPEC.md "Billing" and the Topup states, with DECISIONS.md's event contract
 * (POST /api/billing/payments/events, X-Gateway-Signature = hex HMAC-SHA256 of the raw body
 * with PAYMENT_WEBHOOK_SECRET, body {id, event, provider_reference, amount_tzs, occurred_at},
 * idempotent by event id, 401 on a bad signature) and the embedded fake gateway.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import {
  type AuthTestApp,
  expectError,
  expectOk,
  freshPhone,
  gatewayEvent,
  onboard,
  type Onboarded,
  postGatewayEvent,
  registerVia,
  RFC3339_Z,
  signWith,
  startService,
  TOPUP_SPEC_FIELDS,
} from "./support.ts"

// The service hands out links on BASE_URL and the fake gateway posts its events there; the test
// server listens on a random port, so requests to BASE_URL are sent to it.
const BASE_URL = "http://billing-acceptance.test"
let target = ""
const routed = Layer.succeed(
  HttpClient,
  HttpClient.of({
    fetch: (input, init) => {
      const url = String(input instanceof Request ? input.url : input)
      return globalThis.fetch(url.startsWith(BASE_URL) ? target + url.slice(BASE_URL.length) : input, init)
    },
  }),
)

let t: AuthTestApp
beforeAll(async () => {
  t = await startService({ settings: { baseUrl: BASE_URL }, layers: [routed as Layer.Layer<never, never, never>] })
  target = t.api.url
})
afterAll(() => t.api.stop())

const balance = async (acc: Onboarded) => expectOk(await t.api.call("GET", "/api/billing/balance", { token: acc.key })).balance_tzs as number

const topup = async (acc: Onboarded, amount: number) => {
  const data = expectOk(await t.api.call("POST", "/api/billing/topup", { token: acc.key, body: { amount_tzs: amount } }), 201)
  return data as { topup: Record<string, any>; checkout_url: string; payment_link_url: string; provider_reference: string }
}

const topupStatus = async (acc: Onboarded, id: number) =>
  (expectOk(await t.api.call("GET", "/api/billing/topups", { token: acc.key })) as Array<{ id: number; status: string }>)
    .find((x) => x.id === id)?.status

describe("GET /api/billing/balance", () => {
  it("answers data: {balance_tzs} as an integer, 0 for a new account", async () => {
    const acc = await onboard(t)
    const data = expectOk(await t.api.call("GET", "/api/billing/balance", { token: acc.key }))
    expect(data).toEqual({ balance_tzs: 0 })
  })

  it("needs credentials", async () => {
    expectError(await t.api.call("GET", "/api/billing/balance"), 401, "UNAUTHORIZED")
  })
})

describe("POST /api/billing/topup", () => {
  it("answers 201 data: {topup, checkout_url, payment_link_url, provider_reference} with a pending Topup", async () => {
    const acc = await onboard(t)
    const data = await topup(acc, 2000)
    for (const k of ["topup", "checkout_url", "payment_link_url", "provider_reference"]) expect(Object.keys(data)).toContain(k)
    for (const k of TOPUP_SPEC_FIELDS) expect(Object.keys(data.topup)).toContain(k)
    expect(data.topup).toMatchObject({ user_id: acc.user.id, amount_tzs: 2000, status: "pending", provider_reference: data.provider_reference })
    expect(Number.isInteger(data.topup.id)).toBe(true)
    expect(data.topup.created_at).toMatch(RFC3339_Z)
    expect(typeof data.provider_reference).toBe("string")
    expect(data.provider_reference.length).toBeGreaterThan(0)
    expect(() => new URL(data.checkout_url)).not.toThrow()
    expect(() => new URL(data.payment_link_url)).not.toThrow()
    // Nothing is credited until the gateway reports the payment.
    expect(await balance(acc)).toBe(0)
  })

  it("the checkout link is valid 1 hour", async () => {
    const acc = await onboard(t)
    const { topup: tp } = await topup(acc, 2500)
    if (tp.expires_at !== undefined) {
      expect(Date.parse(tp.expires_at) - Date.parse(tp.created_at)).toBe(3600_000)
    }
  })

  it("answers 400 VALIDATION_ERROR field amount_tzs below 2000, for non-integers, strings and a missing amount", async () => {
    const acc = await onboard(t)
    for (const body of [{ amount_tzs: 1999 }, { amount_tzs: 0 }, { amount_tzs: -5000 }, { amount_tzs: 2000.5 }, { amount_tzs: "2000" }, {}]) {
      expectError(await t.api.call("POST", "/api/billing/topup", { token: acc.key, body }), 400, "VALIDATION_ERROR", "amount_tzs")
    }
  })

  it("is allowed before identity verification", async () => {
    const s = await registerVia(t)
    expectOk(await t.api.call("POST", "/api/billing/topup", { token: s.token, body: { amount_tzs: 2000 } }), 201)
  })
})

describe("POST /api/billing/topup/phone", () => {
  it("answers 400 VALIDATION_ERROR without a verified phone", async () => {
    const acc = await onboard(t)
    expectError(await t.api.call("POST", "/api/billing/topup/phone", { token: acc.key, body: { amount_tzs: 5000 } }), 400, "VALIDATION_ERROR")
  })

  it("answers 400 VALIDATION_ERROR with a phone that is registered but not verified", async () => {
    const s = await registerVia(t, { phone_number: freshPhone() })
    expectError(await t.api.call("POST", "/api/billing/topup/phone", { token: s.token, body: { amount_tzs: 5000 } }), 400, "VALIDATION_ERROR")
  })

  it("with a verified phone starts a USSD push: 201 with a pending Topup and a provider_reference", async () => {
    const acc = await onboard(t, { phone: true })
    const data = expectOk(await t.api.call("POST", "/api/billing/topup/phone", { token: acc.key, body: { amount_tzs: 5000 } }), 201)
    expect(data.topup).toMatchObject({ user_id: acc.user.id, amount_tzs: 5000, status: "pending" })
    expect(typeof data.provider_reference).toBe("string")
    // The completed event credits it like a checkout top-up.
    const ok = await postGatewayEvent(t, gatewayEvent({ event: "payment.completed", provider_reference: data.provider_reference, amount_tzs: 5000 }))
    expectOk(ok)
    expect(await balance(acc)).toBe(5000)
  })

  it("answers 400 field amount_tzs below 2000", async () => {
    const acc = await onboard(t, { phone: true })
    expectError(await t.api.call("POST", "/api/billing/topup/phone", { token: acc.key, body: { amount_tzs: 100 } }), 400, "VALIDATION_ERROR", "amount_tzs")
  })
})

describe("POST /api/billing/payments/events", () => {
  it("payment.completed moves pending → completed and credits the wallet exactly once, idempotent by event id", async () => {
    const acc = await onboard(t)
    const { topup: tp, provider_reference } = await topup(acc, 7000)
    const raw = gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 7000 })
    expectOk(await postGatewayEvent(t, raw))
    expect(await balance(acc)).toBe(7000)
    expect(await topupStatus(acc, tp.id)).toBe("completed")
    // The same event again: 200, nothing moves.
    expectOk(await postGatewayEvent(t, raw))
    expect(await balance(acc)).toBe(7000)
    // Another completed event for the same top-up: nothing moves either.
    expectOk(await postGatewayEvent(t, gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 7000 })))
    expect(await balance(acc)).toBe(7000)
  })

  for (const event of ["payment.failed", "payment.expired", "payment.voided"]) {
    it(`${event} moves pending → failed; a later completed event credits nothing`, async () => {
      const acc = await onboard(t)
      const { topup: tp, provider_reference } = await topup(acc, 3000)
      expectOk(await postGatewayEvent(t, gatewayEvent({ event, provider_reference, amount_tzs: 3000 })))
      expect(await topupStatus(acc, tp.id)).toBe("failed")
      await postGatewayEvent(t, gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 3000 }))
      expect(await topupStatus(acc, tp.id)).toBe("failed")
      expect(await balance(acc)).toBe(0)
    })
  }

  it("answers 401 UNAUTHORIZED for a bad, missing or mis-keyed signature, and moves nothing", async () => {
    const acc = await onboard(t)
    const { topup: tp, provider_reference } = await topup(acc, 4000)
    const raw = gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 4000 })
    expectError(await postGatewayEvent(t, raw, null), 401, "UNAUTHORIZED")
    expectError(await postGatewayEvent(t, raw, "00".repeat(32)), 401, "UNAUTHORIZED")
    expectError(await postGatewayEvent(t, raw, await signWith("another-secret", raw)), 401, "UNAUTHORIZED")
    // Signed over a different body (re-serialized): the signature covers the raw bytes.
    const reformatted = JSON.stringify(JSON.parse(raw), null, 2)
    expectError(await postGatewayEvent(t, reformatted, await signWith(t.api.settings.paymentWebhookSecret, raw)), 401, "UNAUTHORIZED")
    expect(await topupStatus(acc, tp.id)).toBe("pending")
    expect(await balance(acc)).toBe(0)
  })

  it("takes the signature as lowercase hex of HMAC-SHA256(raw body, PAYMENT_WEBHOOK_SECRET)", async () => {
    const acc = await onboard(t)
    const { provider_reference } = await topup(acc, 2000)
    const raw = gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 2000 })
    const sig = await signWith(t.api.settings.paymentWebhookSecret, raw)
    expect(sig).toMatch(/^[0-9a-f]{64}$/)
    expectOk(await postGatewayEvent(t, raw, sig))
    expect(await balance(acc)).toBe(2000)
  })

  it("needs no account credentials (the signature is the credential)", async () => {
    const acc = await onboard(t)
    const { provider_reference } = await topup(acc, 2000)
    const raw = gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 2000 })
    const res = await postGatewayEvent(t, raw)
    expect(res.status).toBe(200)
  })

  it("a signed event for an unknown reference is 404, an unknown event name 400; nothing moves", async () => {
    const acc = await onboard(t)
    const { topup: tp, provider_reference } = await topup(acc, 2000)
    expectError(await postGatewayEvent(t, gatewayEvent({ event: "payment.completed", provider_reference: "nope_123", amount_tzs: 2000 })), 404, "NOT_FOUND")
    expectError(await postGatewayEvent(t, gatewayEvent({ event: "payment.refunded", provider_reference, amount_tzs: 2000 })), 400, "VALIDATION_ERROR")
    expect(await topupStatus(acc, tp.id)).toBe("pending")
  })

  it("a signed event with a different amount does not credit", async () => {
    const acc = await onboard(t)
    const { topup: tp, provider_reference } = await topup(acc, 2000)
    const res = await postGatewayEvent(t, gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 2_000_000 }))
    expect(res.status).toBe(400)
    expect(await balance(acc)).toBe(0)
    expect(await topupStatus(acc, tp.id)).toBe("pending")
  })

  it("a signed but malformed body is 400 VALIDATION_ERROR", async () => {
    expectError(await postGatewayEvent(t, "{not json"), 400, "VALIDATION_ERROR")
    expectError(await postGatewayEvent(t, JSON.stringify({ id: "evt_1" })), 400, "VALIDATION_ERROR")
  })
})

describe("the embedded fake gateway (no PAYMENT_API_URL)", () => {
  const follow = (url: string, method = "GET") => {
    expect(url.startsWith(BASE_URL)).toBe(true)
    return fetch(t.api.url + url.slice(BASE_URL.length), { method })
  }

  it("its checkout page pays the top-up by emitting the signed event; the wallet is credited", async () => {
    const acc = await onboard(t)
    const { topup: tp, checkout_url } = await topup(acc, 12000)
    const page = await follow(checkout_url)
    expect(page.status).toBe(200)
    const html = await page.text()
    const pay = [...html.matchAll(/<form method="post" action="([^"]+)">/g)].map((m) => m[1]!).find((a) => a.endsWith("/pay"))
    expect(pay).toBeDefined()
    expect((await follow(BASE_URL + pay!, "POST")).status).toBe(200)
    expect(await balance(acc)).toBe(12000)
    expect(await topupStatus(acc, tp.id)).toBe("completed")
  })
})

describe("ownership", () => {
  it("a wallet is the caller's own", async () => {
    const a = await onboard(t)
    const b = await onboard(t)
    const { provider_reference } = await topup(a, 2000)
    expectOk(await postGatewayEvent(t, gatewayEvent({ event: "payment.completed", provider_reference, amount_tzs: 2000 })))
    expect(await balance(a)).toBe(2000)
    expect(await balance(b)).toBe(0)
  })
})
