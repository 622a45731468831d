/**
 * Tokens: single-use rotated refresh tokens with family revocation on re-use, lifetimes (60 min
 * access, 30 days refresh) driven by the movable clock, and the credentials /api/auth/* refuses.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signJwt } from "../../effects/auth/jwt.ts"
import { Database } from "../../effects/ports/Database.ts"
import { createAccount } from "../support/accounts.ts"
import { type AuthTestApp, makeAuthTestApp, register } from "../support/auth.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await makeAuthTestApp()
})
afterAll(() => t.api.stop())

const refresh = (refresh_token: unknown) => t.api.call("POST", "/api/auth/refresh", { body: { refresh_token } })
const me = (token: string) => t.api.call("GET", "/api/auth/me", { token })

describe("refresh", () => {
  it("rotates: each refresh token works once and yields a new working pair", async () => {
    const a = await register(t.api)
    const first = await refresh(a.refreshToken)
    expect(first.status).toBe(200)
    expect(first.body.data.user.id).toBe(a.user.id)
    expect(first.body.data.refresh_token).not.toBe(a.refreshToken)
    expect((await me(first.body.data.token)).status).toBe(200)
    const second = await refresh(first.body.data.refresh_token)
    expect(second.status).toBe(200)
    expect(Object.keys(second.body.data).sort()).toEqual(["refresh_token", "token", "user"])
  })

  it("re-using a rotated token answers 401 and revokes the whole family", async () => {
    const a = await register(t.api)
    const next = (await refresh(a.refreshToken)).body.data
    const replay = await refresh(a.refreshToken)
    expect(replay.status).toBe(401)
    expect(replay.body.errors[0].code).toBe("UNAUTHORIZED")
    // The legitimate successor is dead too: whoever holds it must sign in again.
    expect((await refresh(next.refresh_token)).status).toBe(401)
    // Another sign-in (another family) is unaffected.
    const other = await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email, password: a.password } })
    expect((await refresh(other.body.data.refresh_token)).status).toBe(200)
  })

  it("treats concurrent use of one refresh token as re-use: one wins, then the family is revoked", async () => {
    const a = await register(t.api)
    const answers = await Promise.all([refresh(a.refreshToken), refresh(a.refreshToken), refresh(a.refreshToken)])
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401, 401])
    const winner = answers.find((r) => r.status === 200)!
    expect((await refresh(winner.body.data.refresh_token)).status).toBe(401)
  })

  it("stores only the SHA-256 of refresh tokens", async () => {
    const a = await register(t.api)
    const rows = await t.api.run(Database.use((db) => db.query<{ token_hash: string }>("SELECT token_hash FROM refresh_tokens WHERE user_id = $1", [a.user.id])))
    expect(rows).toHaveLength(1)
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(rows[0]!.token_hash).not.toContain(a.refreshToken.slice(3))
  })

  it("expires refresh tokens after 30 days and access tokens after 60 minutes", async () => {
    const a = await register(t.api)
    const b = await register(t.api)
    t.clock.advance("59 minutes")
    expect((await me(a.token)).status).toBe(200)
    t.clock.advance("2 minutes")
    const expired = await me(a.token)
    expect(expired.status).toBe(401)
    expect(expired.body.errors[0].code).toBe("UNAUTHORIZED")
    // Refresh still works after the access token died.
    const renewed = await refresh(a.refreshToken)
    expect(renewed.status).toBe(200)
    t.clock.advance("29 days")
    expect((await refresh(b.refreshToken)).status).toBe(200)
    t.clock.advance("2 days")
    // a's successor was minted 61 minutes in, so 30 days later it is gone.
    expect((await refresh(renewed.body.data.refresh_token)).status).toBe(401)
  })

  it.each([
    ["missing", undefined],
    ["wrong type", 42],
    ["empty", ""],
    ["too long", `rt_${"a".repeat(300)}`],
  ])("answers 400 for a %s refresh_token", async (_, value) => {
    const res = await t.api.call("POST", "/api/auth/refresh", { body: value === undefined ? {} : { refresh_token: value } })
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field: "refresh_token", code: "VALIDATION_ERROR" })
  })

  it.each([
    ["forged token of the right shape", `rt_${"0".repeat(64)}`],
    ["token of the wrong shape", "not-a-refresh-token"],
    ["an access token", "ACCESS"],
  ])("answers 401 for a %s", async (_, value) => {
    const a = await register(t.api)
    const res = await refresh(value === "ACCESS" ? a.token : value)
    expect(res.status).toBe(401)
    expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
  })

  it("answers 403 ACCOUNT_DISABLED for a disabled account's refresh token, and works again once enabled", async () => {
    const a = await register(t.api)
    await t.api.run(Database.use((db) => db.query("UPDATE users SET disabled_at = now() WHERE id = $1", [a.user.id])))
    const res = await refresh(a.refreshToken)
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("ACCOUNT_DISABLED")
    await t.api.run(Database.use((db) => db.query("UPDATE users SET disabled_at = NULL WHERE id = $1", [a.user.id])))
    expect((await refresh(a.refreshToken)).status).toBe(200)
  })
})

describe("credentials on /api/auth/*", () => {
  it("refuses an API key (any header form) on JWT-only endpoints with 401", async () => {
    const acc = await createAccount(t.api)
    const forms: Array<Record<string, string>> = [{ authorization: `Bearer ${acc.apiKey}` }, { authorization: acc.apiKey }, { "x-api-key": acc.apiKey }]
    for (const headers of forms) {
      for (const [method, path] of [["GET", "/api/auth/me"], ["POST", "/api/auth/email/resend"], ["GET", "/api/apikeys/"]] as const) {
        const res = await t.api.call(method, path, { headers })
        expect(res.status, `${method} ${path} ${Object.keys(headers)[0]}`).toBe(401)
        expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
      }
    }
  })

  it.each([
    ["no header", {}],
    ["empty Authorization", { authorization: "" }],
    ["Bearer without token", { authorization: "Bearer" }],
    ["Basic scheme", { authorization: "Basic dXNlcjpwYXNz" }],
    ["two tokens", { authorization: "Bearer a.b.c d.e.f" }],
    ["garbage JWT", { authorization: "Bearer not.a.jwt" }],
    ["JWT signed with another key", { authorization: "FORGED" }],
    ["email-verification token as access token", { authorization: "EMAILTOKEN" }],
    ["unknown key of the right shape", { "x-api-key": `MAIL_${"ab".repeat(32)}` }],
  ])("answers 401 UNAUTHORIZED for %s", async (name, headers: Record<string, string>) => {
    const a = await register(t.api)
    const resolved = { ...headers }
    if (headers.authorization === "FORGED") {
      const forged = await t.api.run(signJwt(new TextEncoder().encode("another-secret-entirely-32-bytes"), {
        sub: String(a.user.id),
        typ: "access",
        iat: Math.floor(t.clock.now() / 1000),
        exp: Math.floor(t.clock.now() / 1000) + 3600,
      }))
      resolved.authorization = `Bearer ${forged}`
    }
    if (headers.authorization === "EMAILTOKEN") resolved.authorization = `Bearer ${t.outbox.lastToken(a.email)}`
    const res = await t.api.call("GET", "/api/auth/me", { headers: resolved })
    expect(res.status, name).toBe(401)
    expect(res.body.success).toBe(false)
    expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
  })

  it("answers 403 ACCOUNT_DISABLED to a disabled account's access token on its next request", async () => {
    const a = await register(t.api)
    expect((await me(a.token)).status).toBe(200)
    await t.api.run(Database.use((db) => db.query("UPDATE users SET disabled_at = now() WHERE id = $1", [a.user.id])))
    const res = await me(a.token)
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("ACCOUNT_DISABLED")
  })

  it("keeps tokens scoped to their own account", async () => {
    const a = await register(t.api)
    const b = await register(t.api)
    expect((await me(a.token)).body.data.user.id).toBe(a.user.id)
    expect((await me(b.token)).body.data.user.id).toBe(b.user.id)
    await t.api.call("PATCH", "/api/auth/me", { token: a.token, body: { name: "Only A" } })
    expect((await me(b.token)).body.data.user.name).not.toBe("Only A")
  })
})

describe("Authenticator through Effect", () => {
  it("resolves a JWT principal with full scopes", async () => {
    const a = await register(t.api)
    const { Authenticator } = await import("../../effects/auth/service.ts")
    const principal = await t.api.run(Effect.gen(function*() {
      const auth = yield* Authenticator
      return yield* auth.authenticate({ authorization: `Bearer ${a.token}` }, "key")
    }))
    expect(principal).toMatchObject({ userId: a.user.id, via: "jwt", full: true, apiKeyId: null })
  })
})
