import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { FakeGateway } from "../../src/providers/payment-fake.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { balanceOf, createTopup, expectLedgerConsistent, query } from "./support.ts"

// The fake gateway posts its events to BASE_URL, as a real gateway posts to its callback URL.
// The test server listens on a random port, so this client sends BASE_URL to wherever it runs.
const BASE_URL = "http://billing-fake.test"
let target = ""
const routedToTestServer = Layer.succeed(
  HttpClient,
  HttpClient.of({
    fetch: (input, init) => {
      const url = String(input instanceof Request ? input.url : input)
      return globalThis.fetch(url.startsWith(BASE_URL) ? target + url.slice(BASE_URL.length) : input, init)
    },
  }),
)

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false, settings: { baseUrl: BASE_URL }, infrastructure: routedToTestServer })
  target = api.url
})
afterAll(async () => {
  await expectLedgerConsistent(api)
  await api.stop()
})

/** Follows a URL the service handed out (it points at BASE_URL) on the test server. */
const page = async (url: string, method: "GET" | "POST" = "GET") => {
  expect(url.startsWith(BASE_URL)).toBe(true)
  const res = await fetch(api.url + url.slice(BASE_URL.length), { method })
  return { status: res.status, type: res.headers.get("content-type") ?? "", html: await res.text() }
}

/** The form actions on a checkout page, by button. */
const actions = (html: string) => [...html.matchAll(/<form method="post" action="([^"]+)">/g)].map((m) => m[1]!)

const statusOf = (html: string) => /data-status="([a-z]+)"/.exec(html)?.[1]

describe("fake gateway, end to end over HTTP", () => {
  it("checkout page → Pay → the signed event credits the wallet", async () => {
    const account = await createAccount(api)
    const { topup, checkout_url } = await createTopup(api, account, 15000)

    const checkout = await page(checkout_url)
    expect(checkout.status).toBe(200)
    expect(checkout.type).toMatch(/^text\/html/)
    expect(checkout.html).toContain("TZS 15,000")
    expect(statusOf(checkout.html)).toBe("open")
    const [pay, fail] = actions(checkout.html)
    expect(pay).toMatch(/\/pay$/)
    expect(fail).toMatch(/\/fail$/)

    const paid = await page(BASE_URL + pay!, "POST")
    expect(paid.status).toBe(200)
    expect(statusOf(paid.html)).toBe("paid")
    expect(paid.html).toContain("HTTP 200, applied")

    expect(await balanceOf(api, account)).toBe(15000)
    const one = await api.call("GET", `/api/billing/topups/${topup.id}`, { token: account.apiKey })
    expect(one.body.data.status).toBe("completed")
    // The event went through the public endpoint, signed, and was recorded there.
    const events = await query<{ event: string; outcome: string }>(
      api,
      "SELECT event, outcome FROM payment_events WHERE topup_id = $1",
      [topup.id],
    )
    expect(events).toEqual([{ event: "payment.completed", outcome: "applied" }])
  })

  it("pressing again re-sends the same event: answered as a duplicate, credited once", async () => {
    const account = await createAccount(api)
    const { checkout_url } = await createTopup(api, account, 3000)
    const [pay] = actions((await page(checkout_url)).html)
    await page(BASE_URL + pay!, "POST")
    const again = await page(BASE_URL + pay!, "POST")
    expect(again.html).toContain("HTTP 200, duplicate")
    // After settling, the page offers only the re-send; a late "fail" re-sends the completed event too.
    const fail = pay!.replace(/\/pay$/, "/fail")
    const late = await page(BASE_URL + fail, "POST")
    expect(statusOf(late.html)).toBe("paid")
    expect(await balanceOf(api, account)).toBe(3000)
  })

  it("Fail fails the top-up and moves no money", async () => {
    const account = await createAccount(api)
    const { topup, checkout_url } = await createTopup(api, account, 4000)
    const [, fail] = actions((await page(checkout_url)).html)
    const failed = await page(BASE_URL + fail!, "POST")
    expect(statusOf(failed.html)).toBe("failed")
    expect(failed.html).toContain("HTTP 200, applied")
    const one = await api.call("GET", `/api/billing/topups/${topup.id}`, { token: account.apiKey })
    expect(one.body.data.status).toBe("failed")
    expect(await balanceOf(api, account)).toBe(0)
  })

  it("a USSD push is approved on the same page", async () => {
    const account = await createAccount(api, { phone: "+255754000001", phoneVerified: true })
    const res = await api.call("POST", "/api/billing/topup/phone", { token: account.apiKey, body: { amount_tzs: 2500 } })
    expect(res.status).toBe(201)
    const checkout = await page(`${BASE_URL}/fake-gateway/checkout/${res.body.data.provider_reference}`)
    expect(checkout.html).toContain("USSD push to +255754000001")
    const [pay] = actions(checkout.html)
    await page(BASE_URL + pay!, "POST")
    expect(await balanceOf(api, account)).toBe(2500)
  })

  it("paying after the link expired emits payment.expired (time from the Clock)", async () => {
    const account = await createAccount(api)
    const { topup, provider_reference } = await createTopup(api, account, 6000)
    const result = await api.run(
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse(topup.expires_at))
        // The fake is in the runtime only when chosen (it is here), so the type says Option.
        const fake = Option.getOrThrow(yield* Effect.serviceOption(FakeGateway))
        return yield* fake.press(provider_reference, "pay")
      }).pipe(Effect.provide(TestClock.layer())),
    )
    expect(result.payment.status).toBe("expired")
    expect(result.delivery).toMatchObject({ ok: true, status: 200, outcome: "applied" })
    const one = await api.call("GET", `/api/billing/topups/${topup.id}`, { token: account.apiKey })
    expect(one.body.data.status).toBe("failed")
    expect(await balanceOf(api, account)).toBe(0)
  })

  it("answers 404 for an unknown or malformed reference", async () => {
    expect((await page(`${BASE_URL}/fake-gateway/checkout/fake_000000000000000000000000`)).status).toBe(404)
    expect((await page(`${BASE_URL}/fake-gateway/checkout/<script>`)).status).toBe(400)
    expect((await page(`${BASE_URL}/fake-gateway/checkout/fake_000000000000000000000000/pay`, "POST")).status).toBe(404)
  })

  it("is not in the OpenAPI document", async () => {
    const doc = await api.call("GET", "/api/openapi.json")
    const paths = Object.keys(doc.body.paths)
    expect(paths.some((p) => p.startsWith("/fake-gateway"))).toBe(false)
    expect(paths).toEqual(expect.arrayContaining(["/api/billing/balance", "/api/billing/topup", "/api/billing/topup/phone", "/api/billing/transactions"]))
  })
})
