/**
 * Acceptance: SPEC.md "API keys" and "Authentication", with DECISIONS.md's rules: 201 at
 * creation with data {api_key, key}, plaintext `MAIL_` + 64 lowercase hex shown once,
 * key_prefix = first 12 characters, active keys only in the list, revocation (DELETE or POST)
 * and expiry at once, scopes (403 FORBIDDEN when missing, 400 when unknown), the three header
 * forms, JWT accepted on Key endpoints and API keys refused (401) on /api/apikeys/*.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  API_KEY_FIELDS,
  type AuthTestApp,
  createKeyVia,
  expectError,
  expectOk,
  keyHeaders,
  onboard,
  type Onboarded,
  registerVia,
  RFC3339_Z,
  startService,
} from "./support.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await startService()
})
afterAll(() => t.api.stop())

const BALANCE = "/api/billing/balance"
const expectApiKey = (k: Record<string, unknown>) => {
  expect(Object.keys(k).sort()).toEqual(API_KEY_FIELDS)
  expect(Number.isInteger(k.id)).toBe(true)
  expect(Number.isInteger(k.user_id)).toBe(true)
  expect(typeof k.name).toBe("string")
  expect(typeof k.scopes).toBe("string")
  expect(k.created_at).toMatch(RFC3339_Z)
  for (const f of ["last_used_at", "expires_at", "revoked_at"] as const) {
    if (k[f] !== null) expect(k[f]).toMatch(RFC3339_Z)
  }
}

describe("POST /api/apikeys/", () => {
  it("answers 201 with data {api_key, key}; key is MAIL_ + 64 lowercase hex; key_prefix its first 12 chars", async () => {
    const s = await registerVia(t)
    const res = await t.api.call("POST", "/api/apikeys/", { token: s.token, body: { name: "production" } })
    const data = expectOk(res, 201)
    expect(Object.keys(data).sort()).toEqual(["api_key", "key"])
    expect(data.key).toMatch(/^MAIL_[0-9a-f]{64}$/)
    expectApiKey(data.api_key)
    expect(data.api_key).toMatchObject({
      user_id: s.user.id,
      name: "production",
      key_prefix: data.key.slice(0, 12),
      scopes: "full",
      last_used_at: null,
      expires_at: null,
      revoked_at: null,
    })
    expect(data.api_key.key_prefix).toMatch(/^MAIL_[0-9a-f]{7}$/)
  })

  it("also answers at /api/apikeys (no trailing slash)", async () => {
    const s = await registerVia(t)
    expectOk(await t.api.call("POST", "/api/apikeys", { token: s.token, body: { name: "x" } }), 201)
    expect(expectOk(await t.api.call("GET", "/api/apikeys", { token: s.token }))).toHaveLength(1)
  })

  it("gives every key a different plaintext", async () => {
    const s = await registerVia(t)
    const a = await createKeyVia(t, s.token)
    const b = await createKeyVia(t, s.token)
    expect(a.key).not.toBe(b.key)
  })

  it("takes scopes as a comma list and expires_at as an ISO timestamp", async () => {
    const s = await registerVia(t)
    const expires = new Date(Date.now() + 7 * 86400_000).toISOString()
    const k = await createKeyVia(t, s.token, { scopes: "billing:read,inbound:read", expires_at: expires })
    expect(k.api_key.scopes).toBe("billing:read,inbound:read")
    expect(Date.parse(k.api_key.expires_at)).toBe(Date.parse(expires))
  })

  it("answers 400 VALIDATION_ERROR for a missing name, an unknown scope, or a bad expires_at", async () => {
    const s = await registerVia(t)
    expectError(await t.api.call("POST", "/api/apikeys/", { token: s.token, body: {} }), 400, "VALIDATION_ERROR", "name")
    expectError(await t.api.call("POST", "/api/apikeys/", { token: s.token, body: { name: "x", scopes: "everything" } }), 400, "VALIDATION_ERROR", "scopes")
    expectError(await t.api.call("POST", "/api/apikeys/", { token: s.token, body: { name: "x", scopes: "billing:read,nope" } }), 400, "VALIDATION_ERROR", "scopes")
    expectError(
      await t.api.call("POST", "/api/apikeys/", { token: s.token, body: { name: "x", expires_at: "next tuesday" } }),
      400,
      "VALIDATION_ERROR",
      "expires_at",
    )
  })

  it("accepts every documented scope", async () => {
    const s = await registerVia(t)
    const all = "inbound:read,inbound:write,outbound:send,outbound:read,templates,domains,webhooks,billing:read,billing:write,sandbox,sms,compliance,agent"
    const k = await createKeyVia(t, s.token, { scopes: all })
    expect(k.api_key.scopes.split(",").length).toBe(13)
  })
})

describe("GET /api/apikeys/", () => {
  it("lists active keys with metadata including last_used_at, never the plaintext", async () => {
    const s = await registerVia(t)
    const a = await createKeyVia(t, s.token, { name: "a" })
    const b = await createKeyVia(t, s.token, { name: "b" })
    const before = expectOk(await t.api.call("GET", "/api/apikeys/", { token: s.token }))
    expect(Array.isArray(before)).toBe(true)
    expect(before.map((k: { id: number }) => k.id).sort()).toEqual([a.api_key.id, b.api_key.id].sort())
    for (const k of before) expectApiKey(k)
    const text = JSON.stringify(before)
    expect(text).not.toContain(a.key)
    expect(text).not.toContain(b.key)
    expect(text).not.toMatch(/key_hash/)
    // Using a key sets last_used_at.
    expectOk(await t.api.call("GET", BALANCE, { token: a.key }))
    const after = expectOk(await t.api.call("GET", "/api/apikeys/", { token: s.token }))
    expect(after.find((k: { id: number }) => k.id === a.api_key.id).last_used_at).toMatch(RFC3339_Z)
  })

  it("is scoped to the caller's account", async () => {
    const one = await registerVia(t)
    const two = await registerVia(t)
    await createKeyVia(t, one.token)
    expect(expectOk(await t.api.call("GET", "/api/apikeys/", { token: two.token }))).toEqual([])
  })
})

describe("revocation", () => {
  it("DELETE /api/apikeys/{id} revokes with immediate effect; the key leaves the list", async () => {
    const acc = await onboard(t)
    expectOk(await t.api.call("GET", BALANCE, { token: acc.key }))
    const res = await t.api.call("DELETE", `/api/apikeys/${acc.keyId}`, { token: acc.token })
    expectOk(res)
    expectError(await t.api.call("GET", BALANCE, { token: acc.key }), 401, "UNAUTHORIZED")
    const list = expectOk(await t.api.call("GET", "/api/apikeys/", { token: acc.token }))
    expect(list.map((k: { id: number }) => k.id)).not.toContain(acc.keyId)
  })

  it("POST /api/apikeys/{id}/revoke has the same effect; revoked_at is set", async () => {
    const acc = await onboard(t)
    const data = expectOk(await t.api.call("POST", `/api/apikeys/${acc.keyId}/revoke`, { token: acc.token }))
    if (data?.api_key) expect(data.api_key.revoked_at).toMatch(RFC3339_Z)
    for (const form of Object.values(keyHeaders)) {
      expectError(await t.api.call("GET", BALANCE, { headers: form(acc.key) }), 401, "UNAUTHORIZED")
    }
  })

  it("another account's key: 403 FORBIDDEN, and it keeps working; a missing key: 404 NOT_FOUND", async () => {
    const victim = await onboard(t)
    const other = await registerVia(t)
    expectError(await t.api.call("DELETE", `/api/apikeys/${victim.keyId}`, { token: other.token }), 403, "FORBIDDEN")
    expectError(await t.api.call("POST", `/api/apikeys/${victim.keyId}/revoke`, { token: other.token }), 403, "FORBIDDEN")
    expectOk(await t.api.call("GET", BALANCE, { token: victim.key }))
    expectError(await t.api.call("DELETE", "/api/apikeys/99999999", { token: other.token }), 404, "NOT_FOUND")
  })

  it("a non-numeric id is 400 or 404, never 500", async () => {
    const s = await registerVia(t)
    const res = await t.api.call("DELETE", "/api/apikeys/abc", { token: s.token })
    expect([400, 404]).toContain(res.status)
  })
})

describe("expiry", () => {
  it("a key stops working once expires_at passes (401)", async () => {
    const s = await registerVia(t)
    const k = await createKeyVia(t, s.token, { expires_at: new Date(t.clock.now() + 3600_000).toISOString() })
    expectOk(await t.api.call("GET", BALANCE, { token: k.key }))
    t.clock.advance("61 minutes")
    expectError(await t.api.call("GET", BALANCE, { token: k.key }), 401, "UNAUTHORIZED")
  })
})

describe("the three header forms (SPEC.md: all equivalent)", () => {
  let acc: Onboarded
  beforeAll(async () => {
    acc = await onboard(t)
  })

  it("X-API-Key, Authorization: Bearer and raw Authorization all work on a Key endpoint", async () => {
    for (const form of Object.values(keyHeaders)) {
      const data = expectOk(await t.api.call("GET", BALANCE, { headers: form(acc.key) }))
      expect(data).toEqual({ balance_tzs: 0 })
    }
  })

  it("a wrong or malformed key answers 401 in every form", async () => {
    const wrong = `MAIL_${"0".repeat(64)}`
    for (const form of Object.values(keyHeaders)) {
      expectError(await t.api.call("GET", BALANCE, { headers: form(wrong) }), 401, "UNAUTHORIZED")
      expectError(await t.api.call("GET", BALANCE, { headers: form("MAIL_short") }), 401, "UNAUTHORIZED")
      expectError(await t.api.call("GET", BALANCE, { headers: form(acc.key.toUpperCase()) }), 401, "UNAUTHORIZED")
    }
  })

  it("no credentials answer 401", async () => {
    expectError(await t.api.call("GET", BALANCE), 401, "UNAUTHORIZED")
  })
})

describe("JWTs on Key endpoints, keys on JWT endpoints", () => {
  it("a JWT access token works on Key endpoints with scope full", async () => {
    const acc = await onboard(t)
    expectOk(await t.api.call("GET", BALANCE, { token: acc.token }))
    expectOk(await t.api.call("POST", "/api/billing/topup", { token: acc.token, body: { amount_tzs: 2000 } }), 201)
  })

  it("an API key (even full) answers 401 UNAUTHORIZED on /api/apikeys/*: a leaked key cannot mint keys", async () => {
    const acc = await onboard(t)
    for (const form of Object.values(keyHeaders)) {
      expectError(await t.api.call("POST", "/api/apikeys/", { headers: form(acc.key), body: { name: "evil" } }), 401, "UNAUTHORIZED")
      expectError(await t.api.call("GET", "/api/apikeys/", { headers: form(acc.key) }), 401, "UNAUTHORIZED")
      expectError(await t.api.call("DELETE", `/api/apikeys/${acc.keyId}`, { headers: form(acc.key) }), 401, "UNAUTHORIZED")
      expectError(await t.api.call("POST", `/api/apikeys/${acc.keyId}/revoke`, { headers: form(acc.key) }), 401, "UNAUTHORIZED")
    }
    // Nothing happened: still one key, still working.
    expect(expectOk(await t.api.call("GET", "/api/apikeys/", { token: acc.token }))).toHaveLength(1)
    expectOk(await t.api.call("GET", BALANCE, { token: acc.key }))
  })

  it("a key is independent of the password: it keeps working after the user signs in again", async () => {
    const acc = await onboard(t)
    expectOk(await t.api.call("POST", "/api/auth/login", { body: { identifier: acc.email, password: acc.password } }))
    expectOk(await t.api.call("GET", BALANCE, { token: acc.key }))
  })
})

describe("scopes", () => {
  it("a key lacking the endpoint's scope answers 403 FORBIDDEN; holding it, 2xx", async () => {
    const s = await registerVia(t)
    const reader = await createKeyVia(t, s.token, { scopes: "billing:read" })
    const writer = await createKeyVia(t, s.token, { scopes: "billing:write" })
    const other = await createKeyVia(t, s.token, { scopes: "inbound:read" })
    expectOk(await t.api.call("GET", BALANCE, { token: reader.key }))
    expectError(await t.api.call("POST", "/api/billing/topup", { token: reader.key, body: { amount_tzs: 2000 } }), 403, "FORBIDDEN")
    expectOk(await t.api.call("POST", "/api/billing/topup", { token: writer.key, body: { amount_tzs: 2000 } }), 201)
    expectError(await t.api.call("GET", BALANCE, { token: writer.key }), 403, "FORBIDDEN")
    expectError(await t.api.call("GET", BALANCE, { token: other.key }), 403, "FORBIDDEN")
    const full = await createKeyVia(t, s.token)
    expectOk(await t.api.call("GET", BALANCE, { token: full.key }))
    expectOk(await t.api.call("POST", "/api/billing/topup", { token: full.key, body: { amount_tzs: 2000 } }), 201)
  })
})
