/**
 * /api/apikeys: create (shown once, hashed, prefixed), list (active only, last_used_at),
 * revoke by DELETE and POST with immediate effect, expiry, scopes, ownership, and the key
 * forms a Key endpoint accepts (probed through a test route on the same runtime).
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { makeHttpApp } from "../../src/http/app.ts"
import { ok, route } from "../../src/http/route.ts"
import { allRoutes } from "../../src/http/routes/index.ts"
import { type AuthTestApp, makeAuthTestApp, register } from "../support/auth.ts"

let t: AuthTestApp
let probe: ReturnType<typeof makeHttpApp>
beforeAll(async () => {
  t = await makeAuthTestApp()
  // Key endpoints of other capabilities may not exist yet: two probes stand in for them.
  const probes = [
    route({
      method: "get",
      path: "/t/inbound",
      auth: "key",
      scope: "inbound:read",
      tag: "T",
      summary: "",
      handler: ({ principal }) => Effect.succeed(ok({ user_id: principal.userId, via: principal.via })),
    }),
  ]
  probe = makeHttpApp({ routes: [...allRoutes, ...probes], runtime: t.api.runtime, maxBodyBytes: 1024 * 1024 })
})
afterAll(() => t.api.stop())

const create = (token: string, body: unknown) => t.api.call("POST", "/api/apikeys/", { token, body })
const list = (token: string) => t.api.call("GET", "/api/apikeys", { token })
const useKey = async (headers: Record<string, string>) => {
  const res = await probe.request("/t/inbound", { headers })
  return { status: res.status, body: await res.json() as any }
}

describe("create", () => {
  it("answers 201 with the ApiKey and the plaintext key, once; stores only its SHA-256", async () => {
    const a = await register(t.api)
    const res = await create(a.token, { name: "CI deploys" })
    expect(res.status).toBe(201)
    const { api_key, key } = res.body.data
    expect(key).toMatch(/^MAIL_[0-9a-f]{64}$/)
    expect(Object.keys(api_key).sort()).toEqual(
      ["created_at", "expires_at", "id", "key_prefix", "last_used_at", "name", "revoked_at", "scopes", "user_id"].sort(),
    )
    expect(api_key).toMatchObject({
      user_id: a.user.id,
      name: "CI deploys",
      key_prefix: key.slice(0, 12),
      scopes: "full",
      last_used_at: null,
      expires_at: null,
      revoked_at: null,
    })
    expect(api_key.key_prefix).toMatch(/^MAIL_[0-9a-f]{7}$/)
    const [row] = await t.api.run(Database.use((db) => db.query<{ key_hash: string }>("SELECT key_hash FROM api_keys WHERE id = $1", [api_key.id])))
    expect(row!.key_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(row!.key_hash).not.toBe(key.slice(5))
    // Never shown again.
    expect(JSON.stringify((await list(a.token)).body)).not.toContain(key)
  })

  it("normalizes a scope list and keeps expires_at", async () => {
    const a = await register(t.api)
    const expires = new Date(t.clock.now() + 7 * 86400_000).toISOString()
    const res = await create(a.token, { name: "reader", scopes: " inbound:read , billing:read,inbound:read", expires_at: expires })
    expect(res.status).toBe(201)
    expect(res.body.data.api_key).toMatchObject({ scopes: "inbound:read,billing:read", expires_at: expires })
    const full = await create(a.token, { name: "all", scopes: "inbound:read,full" })
    expect(full.body.data.api_key.scopes).toBe("full")
  })

  it.each([
    ["missing name", {}, "name"],
    ["name of wrong type", { name: 5 }, "name"],
    ["blank name", { name: "  " }, "name"],
    ["name too long", { name: "n".repeat(201) }, "name"],
    ["unknown scope", { name: "k", scopes: "inbound:read,everything" }, "scopes"],
    ["empty scopes", { name: "k", scopes: " , " }, "scopes"],
    ["scopes of wrong type", { name: "k", scopes: ["full"] }, "scopes"],
    ["expires_at not a date", { name: "k", expires_at: "tomorrow" }, "expires_at"],
    ["expires_at impossible date", { name: "k", expires_at: "2030-02-31T00:00:00Z" }, "expires_at"],
    ["expires_at of wrong type", { name: "k", expires_at: 1893456000 }, "expires_at"],
    ["expires_at in the past", { name: "k", expires_at: "2020-01-01T00:00:00Z" }, "expires_at"],
  ])("answers 400 for %s, creating nothing", async (_, body, field) => {
    const a = await register(t.api)
    const res = await create(a.token, body)
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field, code: "VALIDATION_ERROR" })
    expect((await list(a.token)).body.data).toEqual([])
  })

  it("caps active keys per account at 100 (409 LIMIT_REACHED)", async () => {
    const a = await register(t.api)
    await t.api.run(Database.use((db) =>
      db.query(
        `INSERT INTO api_keys (user_id, name, key_prefix, key_hash, scopes)
         SELECT $1, 'k' || g, 'MAIL_0000000', md5(random()::text || g) || md5(g::text), 'full' FROM generate_series(1, 100) g`,
        [a.user.id],
      )
    ))
    const res = await create(a.token, { name: "one too many" })
    expect(res.status).toBe(409)
    expect(res.body.errors[0].code).toBe("LIMIT_REACHED")
  })
})

describe("use", () => {
  it("accepts all three header forms on a Key endpoint and records last_used_at", async () => {
    const a = await register(t.api)
    const { key, api_key } = (await create(a.token, { name: "k" })).body.data
    const forms: Array<Record<string, string>> = [{ "x-api-key": key }, { authorization: `Bearer ${key}` }, { authorization: key }]
    for (const headers of forms) {
      const res = await useKey(headers)
      expect(res.status, JSON.stringify(headers)).toBe(200)
      expect(res.body.data).toEqual({ user_id: a.user.id, via: "key" })
    }
    const listed = (await list(a.token)).body.data.find((k: any) => k.id === api_key.id)
    expect(listed.last_used_at).not.toBeNull()
  })

  it("JWTs work on Key endpoints too", async () => {
    const a = await register(t.api)
    const res = await useKey({ authorization: `Bearer ${a.token}` })
    expect(res.status).toBe(200)
    expect(res.body.data.via).toBe("jwt")
  })

  it("refuses unknown keys of the right shape, malformed keys and conflicting headers with 401", async () => {
    const a = await register(t.api)
    const { key } = (await create(a.token, { name: "k" })).body.data
    for (
      const headers of [
        { "x-api-key": `MAIL_${"0".repeat(64)}` },
        { "x-api-key": `MAIL_${"A".repeat(64)}` },
        { "x-api-key": key.slice(0, -1) },
        { authorization: `Bearer MAIL_${"1".repeat(64)}` },
        { authorization: "Token whatever" },
        { "x-api-key": key, authorization: `Bearer MAIL_${"2".repeat(64)}` },
      ]
    ) {
      const res = await useKey(headers as Record<string, string>)
      expect(res.status, JSON.stringify(headers)).toBe(401)
      expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
    }
  })

  it("answers 403 FORBIDDEN to a key without the endpoint's scope", async () => {
    const a = await register(t.api)
    const { key } = (await create(a.token, { name: "billing", scopes: "billing:read" })).body.data
    const res = await useKey({ "x-api-key": key })
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("FORBIDDEN")
    const { key: reader } = (await create(a.token, { name: "reader", scopes: "inbound:read" })).body.data
    expect((await useKey({ "x-api-key": reader })).status).toBe(200)
  })

  it("stops working when expires_at passes", async () => {
    const a = await register(t.api)
    const expires = new Date(t.clock.now() + 3600_000).toISOString()
    const { key } = (await create(a.token, { name: "short", expires_at: expires })).body.data
    expect((await useKey({ "x-api-key": key })).status).toBe(200)
    t.clock.advance("61 minutes")
    const res = await useKey({ "x-api-key": key })
    expect(res.status).toBe(401)
    expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
    // Expired keys are still listed (not revoked), with their expires_at. (The access token
    // expired too after 60 minutes: take a fresh one.)
    const fresh = await t.api.call("POST", "/api/auth/refresh", { body: { refresh_token: a.refreshToken } })
    expect((await list(fresh.body.data.token)).body.data.map((k: any) => k.expires_at)).toContain(expires)
  })

  it("stops working for a disabled account at once", async () => {
    const a = await register(t.api)
    const { key } = (await create(a.token, { name: "k" })).body.data
    await t.api.run(Database.use((db) => db.query("UPDATE users SET disabled_at = now() WHERE id = $1", [a.user.id])))
    const res = await useKey({ "x-api-key": key })
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("ACCOUNT_DISABLED")
  })

  it("cannot manage keys (JWT only)", async () => {
    const a = await register(t.api)
    const { key, api_key } = (await create(a.token, { name: "k" })).body.data
    const forms: Array<Record<string, string>> = [{ "x-api-key": key }, { authorization: `Bearer ${key}` }, { authorization: key }]
    for (const headers of forms) {
      expect((await t.api.call("POST", "/api/apikeys", { headers, body: { name: "minted" } })).status).toBe(401)
      expect((await t.api.call("GET", "/api/apikeys", { headers })).status).toBe(401)
      expect((await t.api.call("DELETE", `/api/apikeys/${api_key.id}`, { headers })).status).toBe(401)
    }
  })
})

describe("list and revoke", () => {
  it("lists the account's active keys only, newest first", async () => {
    const a = await register(t.api)
    const b = await register(t.api)
    const k1 = (await create(a.token, { name: "one" })).body.data.api_key
    const k2 = (await create(a.token, { name: "two" })).body.data.api_key
    await create(b.token, { name: "b's" })
    await t.api.call("DELETE", `/api/apikeys/${k1.id}`, { token: a.token })
    const res = await list(a.token)
    expect(res.status).toBe(200)
    expect(res.body.data.map((k: any) => k.id)).toEqual([k2.id])
  })

  it.each(["DELETE", "POST"])("revokes with %s, effective on the next request, idempotently", async (method) => {
    const a = await register(t.api)
    const { key, api_key } = (await create(a.token, { name: "k" })).body.data
    expect((await useKey({ "x-api-key": key })).status).toBe(200)
    const path = method === "DELETE" ? `/api/apikeys/${api_key.id}` : `/api/apikeys/${api_key.id}/revoke`
    const res = await t.api.call(method, path, { token: a.token })
    expect(res.status).toBe(200)
    expect(res.body.data.api_key.id).toBe(api_key.id)
    expect(res.body.data.api_key.revoked_at).not.toBeNull()
    expect((await useKey({ "x-api-key": key })).status).toBe(401)
    const again = await t.api.call(method, path, { token: a.token })
    expect(again.status).toBe(200)
    expect(again.body.data.api_key.revoked_at).toBe(res.body.data.api_key.revoked_at)
  })

  it("answers 403 for another account's key (leaving it working) and 404 for a missing one", async () => {
    const a = await register(t.api)
    const b = await register(t.api)
    const { key, api_key } = (await create(b.token, { name: "b" })).body.data
    for (const [method, path] of [["DELETE", `/api/apikeys/${api_key.id}`], ["POST", `/api/apikeys/${api_key.id}/revoke`]] as const) {
      const res = await t.api.call(method, path, { token: a.token })
      expect(res.status).toBe(403)
      expect(res.body.errors[0].code).toBe("FORBIDDEN")
      expect(JSON.stringify(res.body)).not.toContain(api_key.key_prefix)
    }
    expect((await useKey({ "x-api-key": key })).status).toBe(200)
    const missing = await t.api.call("DELETE", "/api/apikeys/999999", { token: a.token })
    expect(missing.status).toBe(404)
    expect(missing.body.errors[0].code).toBe("NOT_FOUND")
  })

  it.each(["abc", "0", "-1", "1.5"])("answers 400 for id %s", async (id) => {
    const a = await register(t.api)
    const res = await t.api.call("DELETE", `/api/apikeys/${id}`, { token: a.token })
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe("id")
  })
})
