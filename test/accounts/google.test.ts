/**
 * POST /api/auth/google: RS256 id_tokens signed by a key this test generates, its JWKS served
 * by msw and fetched through the HttpClient port; account creation, linking, and every way a
 * token can be wrong.
 */
import { Layer, Option } from "effect"
import { http, HttpResponse } from "msw"
import { setupServer } from "msw/node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { Database } from "../../effects/ports/Database.ts"
import { toBase64Url } from "../../effects/shared/crypto.ts"
import { type AuthTestApp, freshEmail, makeAuthTestApp, register } from "../support/auth.ts"

const JWKS_URL = "https://google-jwks.test/oauth2/v3/certs"
const CLIENT_ID = "1234-test.apps.googleusercontent.com"
const enc = new TextEncoder()

const rsaKey = () =>
  crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  ) as Promise<CryptoKeyPair>

let google: CryptoKeyPair
let impostor: CryptoKeyPair
let jwksStatus = 200
const fetched: Array<string> = []

const server = setupServer(
  http.get(JWKS_URL, async () => {
    if (jwksStatus !== 200) return new HttpResponse("down", { status: jwksStatus })
    const pub = await crypto.subtle.exportKey("jwk", google.publicKey)
    return HttpResponse.json(
      { keys: [{ kty: "EC", kid: "ignored-ec", crv: "P-256", x: "x", y: "y" }, { ...pub, kid: "key-1", alg: "RS256", use: "sig" }] },
      { headers: { "cache-control": "public, max-age=3600" } },
    )
  }),
)

const sign = async (claims: Record<string, unknown>, options: { kid?: string; alg?: string; key?: CryptoKey } = {}) => {
  const header = toBase64Url(enc.encode(JSON.stringify({ alg: options.alg ?? "RS256", kid: options.kid ?? "key-1", typ: "JWT" })))
  const payload = toBase64Url(enc.encode(JSON.stringify(claims)))
  const sig = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", options.key ?? google.privateKey, enc.encode(`${header}.${payload}`))
  return `${header}.${payload}.${toBase64Url(new Uint8Array(sig))}`
}

let t: AuthTestApp
const claims = (over: Record<string, unknown> = {}) => {
  const now = Math.floor(t.clock.now() / 1000)
  return {
    iss: "https://accounts.google.com",
    aud: CLIENT_ID,
    sub: `g-${Math.random().toString(36).slice(2)}`,
    email: freshEmail(),
    email_verified: true,
    name: "Zawadi Mushi",
    iat: now,
    exp: now + 3600,
    ...over,
  }
}

beforeAll(async () => {
  ;[google, impostor] = await Promise.all([rsaKey(), rsaKey()])
  server.listen({ onUnhandledFrame: "bypass" })
  // An HttpClient that notes what it fetched, proving the verifier goes through the port.
  const recording = Layer.succeed(HttpClient, HttpClient.of({
    fetch: (input, init) => {
      fetched.push(String(input instanceof Request ? input.url : input))
      return globalThis.fetch(input, init)
    },
  }))
  t = await makeAuthTestApp({ settings: { googleClientId: Option.some(CLIENT_ID), googleJwksUrl: JWKS_URL }, layers: [recording] })
})
afterAll(async () => {
  await t.api.stop()
  server.close()
})

const signIn = (id_token: unknown) => t.api.call("POST", "/api/auth/google", { body: { id_token } })
const expectUnauthorized = (res: { status: number; body: any }) => {
  expect(res.status).toBe(401)
  expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
}

describe("Google sign-in", () => {
  it("creates an account on first sign-in and finds it afterwards", async () => {
    const c = claims({ email: "Zawadi@Example.CO.TZ".replace("Zawadi", `zawadi${Date.now()}`) })
    const first = await signIn(await sign(c))
    expect(first.status).toBe(200)
    expect(Object.keys(first.body.data).sort()).toEqual(["refresh_token", "token", "user"])
    expect(first.body.data.user).toMatchObject({ name: "Zawadi Mushi", email: String(c.email).toLowerCase(), email_verified: true, phone_number: null })
    expect(fetched).toContain(JWKS_URL)
    const again = await signIn(await sign({ ...c, iat: c.iat + 1 }))
    expect(again.status).toBe(200)
    expect(again.body.data.user.id).toBe(first.body.data.user.id)
    const me = await t.api.call("GET", "/api/auth/me", { token: again.body.data.token })
    expect(me.body.data.user.id).toBe(first.body.data.user.id)
    // Google-only accounts have no password to sign in with.
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: c.email, password: "anything at all" } })).status).toBe(401)
  })

  it("accepts the issuer without scheme, an audience list and the string \"true\" for email_verified", async () => {
    const res = await signIn(await sign(claims({ iss: "accounts.google.com", aud: ["other", CLIENT_ID], email_verified: "true" })))
    expect(res.status).toBe(200)
    expect(res.body.data.user.email_verified).toBe(true)
  })

  it("links to an existing account whose email is verified on both sides", async () => {
    const a = await register(t.api)
    await t.api.call("POST", "/api/auth/email/verify", { body: { token: t.outbox.lastToken(a.email) } })
    const res = await signIn(await sign(claims({ email: a.email })))
    expect(res.status).toBe(200)
    expect(res.body.data.user.id).toBe(a.user.id)
    // The password still works too.
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email, password: a.password } })).status).toBe(200)
  })

  it("refuses to link when the local email is unverified or Google's is (409 CONFLICT)", async () => {
    const a = await register(t.api)
    const unverifiedLocal = await signIn(await sign(claims({ email: a.email })))
    expect(unverifiedLocal.status).toBe(409)
    expect(unverifiedLocal.body.errors[0].code).toBe("CONFLICT")
    const b = await register(t.api)
    await t.api.call("POST", "/api/auth/email/verify", { body: { token: t.outbox.lastToken(b.email) } })
    const unverifiedGoogle = await signIn(await sign(claims({ email: b.email, email_verified: false })))
    expect(unverifiedGoogle.status).toBe(409)
    const [row] = await t.api.run(Database.use((db) => db.query<{ google_sub: string | null }>("SELECT google_sub FROM users WHERE id = $1", [b.user.id])))
    expect(row!.google_sub).toBeNull()
  })

  it("answers 403 ACCOUNT_DISABLED for a disabled account", async () => {
    const c = claims()
    const first = await signIn(await sign(c))
    await t.api.run(Database.use((db) => db.query("UPDATE users SET disabled_at = now() WHERE id = $1", [first.body.data.user.id])))
    const res = await signIn(await sign(c))
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("ACCOUNT_DISABLED")
  })

  it("answers 400 on id_token for a token without email", async () => {
    const { email: _, ...noEmail } = claims()
    const res = await signIn(await sign(noEmail))
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe("id_token")
  })

  const cases: Array<[string, () => Promise<string>]> = [
    ["another audience", () => sign(claims({ aud: "someone-else" }))],
    ["another issuer", () => sign(claims({ iss: "https://evil.example" }))],
    ["an expired token", () => sign(claims({ exp: Math.floor(t.clock.now() / 1000) - 120 }))],
    ["a token issued in the future", () => sign(claims({ iat: Math.floor(t.clock.now() / 1000) + 600 }))],
    ["a signature by another key", () => sign(claims(), { key: impostor.privateKey })],
    ["an unknown kid", () => sign(claims(), { kid: "rotated-away" })],
    ["alg none", async () => (await sign(claims(), { alg: "none" })).split(".").slice(0, 2).join(".") + "."],
    ["alg HS256", () => sign(claims(), { alg: "HS256" })],
    ["a tampered payload", async () => {
      const [h, , s] = (await sign(claims())).split(".")
      return `${h}.${toBase64Url(enc.encode(JSON.stringify(claims({ sub: "victim" }))))}.${s}`
    }],
    ["two segments", async () => "a.b"],
    ["garbage", async () => "not a jwt at all"],
    ["claims of the wrong types", () => sign({ ...claims(), exp: "tomorrow" })],
  ]
  it.each(cases)("answers 401 UNAUTHORIZED for %s, creating nothing", async (_, token) => {
    const count = async () =>
      (await t.api.run(Database.use((db) => db.query<{ n: number }>("SELECT count(*)::int AS n FROM users"))))[0]!.n
    const before = await count()
    expectUnauthorized(await signIn(await token()))
    expect(await count()).toBe(before)
  })

  it.each([["missing", {}], ["wrong type", { id_token: 1 }], ["empty", { id_token: "" }]])(
    "answers 400 for a %s id_token",
    async (_, body) => {
      const res = await t.api.call("POST", "/api/auth/google", { body })
      expect(res.status).toBe(400)
      expect(res.body.errors[0].field).toBe("id_token")
    },
  )

  it("fetches Google's keys once per hour, not per sign-in (time from the Clock)", async () => {
    t.clock.advance("61 minutes")
    const before = fetched.length
    for (let i = 0; i < 3; i++) expect((await signIn(await sign(claims()))).status).toBe(200)
    expect(fetched.length - before).toBe(1)
    t.clock.advance("59 minutes")
    expect((await signIn(await sign(claims()))).status).toBe(200)
    expect(fetched.length - before).toBe(1)
    t.clock.advance("2 minutes")
    expect((await signIn(await sign(claims()))).status).toBe(200)
    expect(fetched.length - before).toBe(2)
    expect(fetched.every((url) => url === JWKS_URL)).toBe(true)
  })

  it("answers 502 PROVIDER_ERROR when the JWKS cannot be fetched (after the cache expired)", async () => {
    t.clock.advance("61 minutes")
    jwksStatus = 500
    try {
      const res = await signIn(await sign(claims()))
      expect(res.status).toBe(502)
      expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
      expect(JSON.stringify(res.body)).not.toContain("down")
    } finally {
      jwksStatus = 200
    }
    expect((await signIn(await sign(claims()))).status).toBe(200)
  })
})

describe("Google sign-in unconfigured", () => {
  it("answers 503 NOT_CONFIGURED without GOOGLE_CLIENT_ID", async () => {
    const bare = await makeAuthTestApp()
    try {
      const res = await bare.api.call("POST", "/api/auth/google", { body: { id_token: await sign(claims()) } })
      expect(res.status).toBe(503)
      expect(res.body.errors[0].code).toBe("NOT_CONFIGURED")
    } finally {
      await bare.api.stop()
    }
  })
})
