/**
 * Acceptance: the envelope and HTTP rules of SPEC.md "Response envelope" / "Errors" and
 * DECISIONS.md "Envelope and HTTP", checked from outside on every kind of answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthTestApp, expectEnvelope, expectError, expectOk, onboard, type Onboarded, startService } from "./support.ts"

let t: AuthTestApp
let acc: Onboarded
beforeAll(async () => {
  t = await startService()
  acc = await onboard(t)
})
afterAll(() => t.api.stop())

describe("envelope", () => {
  it("wraps health and readiness answers (200)", async () => {
    expect(expectOk(await t.api.call("GET", "/healthz"))).toBeDefined()
    expect(expectOk(await t.api.call("GET", "/readyz"))).toBeDefined()
  })

  it("is on successes, with success true, an RFC 3339 Z timestamp close to now and a request id", async () => {
    const res = await t.api.call("GET", "/api/auth/me", { token: acc.token })
    expectOk(res)
    expect(Math.abs(Date.parse(res.body.timestamp) - Date.now())).toBeLessThan(60_000)
  })

  it("is on unknown routes: 404 NOT_FOUND", async () => {
    for (const [m, p] of [["GET", "/api/nothing-here"], ["POST", "/api/auth/nope"], ["GET", "/"], ["DELETE", "/api/billing"]] as const) {
      expectError(await t.api.call(m, p), 404, "NOT_FOUND")
    }
  })

  it("is on 401s", async () => {
    expectError(await t.api.call("GET", "/api/auth/me"), 401, "UNAUTHORIZED")
    expectError(await t.api.call("GET", "/api/billing/balance"), 401, "UNAUTHORIZED")
  })

  it("is on method mismatches of a known path", async () => {
    const res = await t.api.call("PUT", "/api/auth/me", { token: acc.token, body: {} })
    expect(res.status).toBeGreaterThanOrEqual(400)
    expectEnvelope(res)
    expect(res.body.success).toBe(false)
  })
})

describe("X-Request-Id", () => {
  it("is sent on every answer and equals the body's request_id", async () => {
    for (const res of [
      await t.api.call("GET", "/healthz"),
      await t.api.call("GET", "/api/nothing"),
      await t.api.call("POST", "/api/auth/login", { body: {} }),
    ]) {
      expect(res.headers.get("x-request-id")).toBeTruthy()
      expect(res.headers.get("x-request-id")).toBe(res.body.request_id)
    }
  })

  it("echoes a caller's sane id, on successes and errors alike", async () => {
    const ok = await t.api.call("GET", "/api/auth/me", { token: acc.token, headers: { "X-Request-Id": "trace-42.a_b:c" } })
    expect(ok.body.request_id).toBe("trace-42.a_b:c")
    expect(ok.headers.get("x-request-id")).toBe("trace-42.a_b:c")
    const err = await t.api.call("GET", "/api/nothing", { headers: { "X-Request-Id": "abc-123" } })
    expect(err.body.request_id).toBe("abc-123")
  })

  it("replaces an insane one", async () => {
    const res = await t.api.call("GET", "/healthz", { headers: { "X-Request-Id": "bad id\t<x>" } })
    expect(res.body.request_id).not.toContain("<")
    expect(res.body.request_id.length).toBeGreaterThan(0)
  })

  it("is unique per request when none is given", async () => {
    const a = await t.api.call("GET", "/healthz")
    const b = await t.api.call("GET", "/healthz")
    expect(a.body.request_id).not.toBe(b.body.request_id)
  })
})

describe("request decoding (DECISIONS.md: 400 VALIDATION_ERROR, one entry per bad field, dotted paths)", () => {
  it("answers malformed JSON with 400 VALIDATION_ERROR", async () => {
    const res = await t.api.call("POST", "/api/auth/login", { rawBody: "{not json", headers: { "content-type": "application/json" } })
    expectError(res, 400, "VALIDATION_ERROR")
  })

  it("takes a JSON body whatever its Content-Type says (curl -d sends form-urlencoded), and none at all", async () => {
    const body = JSON.stringify({ identifier: acc.email, password: acc.password })
    for (const headers of [{ "content-type": "application/x-www-form-urlencoded" }, { "content-type": "text/plain" }, {}] as Array<Record<string, string>>) {
      const res = await t.api.call("POST", "/api/auth/login", { rawBody: body, headers })
      expect(res.status, JSON.stringify(headers)).toBe(200)
    }
    const form = await t.api.call("POST", "/api/auth/login", { rawBody: "identifier=a&password=b", headers: { "content-type": "application/x-www-form-urlencoded" } })
    expectError(form, 400, "VALIDATION_ERROR", "body")
  })

  it("answers a JSON body that is not an object with 400 VALIDATION_ERROR", async () => {
    for (const raw of ["[1,2]", "null", "\"text\"", "42"]) {
      expectError(await t.api.call("POST", "/api/auth/login", { rawBody: raw, headers: { "content-type": "application/json" } }), 400, "VALIDATION_ERROR")
    }
  })

  it("answers wrong types with one entry per bad field", async () => {
    const res = await t.api.call("POST", "/api/auth/register", { body: { name: 42, password: ["x"], email: "a@b.co.tz" } })
    expectError(res, 400, "VALIDATION_ERROR", "name")
    expectError(res, 400, "VALIDATION_ERROR", "password")
  })

  it("answers paging outside 1..100 with 400 VALIDATION_ERROR naming the field", async () => {
    expectError(await t.api.call("GET", "/api/billing/transactions?per_page=101", { token: acc.key }), 400, "VALIDATION_ERROR", "per_page")
    expectError(await t.api.call("GET", "/api/billing/transactions?per_page=0", { token: acc.key }), 400, "VALIDATION_ERROR", "per_page")
    expectError(await t.api.call("GET", "/api/billing/transactions?page=0", { token: acc.key }), 400, "VALIDATION_ERROR", "page")
    const data = expectOk(await t.api.call("GET", "/api/billing/transactions?per_page=100", { token: acc.key }))
    expect(Array.isArray(data)).toBe(true)
  })

  it("checks credentials before the body: no credentials and a bad body is 401, not 400", async () => {
    expectError(
      await t.api.call("POST", "/api/apikeys/", { rawBody: "{oops", headers: { "content-type": "application/json" } }),
      401,
      "UNAUTHORIZED",
    )
    expectError(await t.api.call("POST", "/api/billing/topup", { body: { amount_tzs: "lots" } }), 401, "UNAUTHORIZED")
  })
})

describe("paged lists", () => {
  it("carry pagination {page, per_page, total, total_pages} with defaults page 1, per_page 20", async () => {
    const res = await t.api.call("GET", "/api/billing/transactions", { token: acc.key })
    expectOk(res)
    expect(res.body.pagination).toEqual({ page: 1, per_page: 20, total: 0, total_pages: 0 })
  })
})
