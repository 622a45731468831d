/**
 * The fake gateway exists only while it is the payment provider (DECISIONS.md "Production
 * mode"): with a live gateway its routes are absent from the app (an unknown path, like any
 * other), and while it runs its page says it is a development stand-in.
 */
import { Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createTopup } from "./support.ts"

const apps: Array<TestApp> = []
afterAll(() => Promise.all(apps.map((a) => a.stop())))

const REFERENCE = "fake_0123456789abcdef01234567"

describe("fake gateway routes", () => {
  it("are absent with a live gateway (PAYMENT_API_URL): 404 for an unknown path, GET and POST", async () => {
    const api = await makeTestApp({
      workers: false,
      settings: { paymentApiUrl: Option.some("https://pay.example"), paymentApiKey: Option.some("k") },
    })
    apps.push(api)
    for (const [method, path] of [["GET", ""], ["POST", "/pay"], ["POST", "/fail"]] as const) {
      const res = await api.call(method, `/fake-gateway/checkout/${REFERENCE}${path}`)
      expect(res.status).toBe(404)
      expect(res.body.errors[0]).toEqual({ code: "NOT_FOUND", message: `no route for ${method} /fake-gateway/checkout/${REFERENCE}${path}` })
    }
  })

  it("are absent when PAYMENT_PROVIDER names the live gateway explicitly", async () => {
    const api = await makeTestApp({
      workers: false,
      settings: { paymentProvider: "http", paymentApiUrl: Option.some("https://pay.example"), paymentApiKey: Option.some("k") },
    })
    apps.push(api)
    expect((await api.call("GET", `/fake-gateway/checkout/${REFERENCE}`)).body.message).toBe("not found")
  })

  it("are served while the fake is the provider, and the page says it is a development stand-in", async () => {
    const api = await makeTestApp({ workers: false, settings: { paymentProvider: "fake", paymentApiUrl: Option.some("https://pay.example") } })
    apps.push(api)
    const account = await createAccount(api)
    const { checkout_url } = await createTopup(api, account, 5000)
    const res = await fetch(api.url + new URL(checkout_url).pathname)
    expect(res.status).toBe(200)
    const html = await res.text()
    expect(html).toContain("development stand-in")
    expect(html).toContain("PAYMENT_PROVIDER=fake")
  })
})
