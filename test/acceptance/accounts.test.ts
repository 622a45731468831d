/**
 * Acceptance: SPEC.md "Account" endpoints, with DECISIONS.md's shapes and codes
 * (data: {token, refresh_token, user} / {user}; 401 wrong login; 409 duplicate; 400 with field
 * `token`/`code` for wrong verification input; JWT only on /api/auth/*; ACCOUNT_DISABLED).
 */
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuthRateLimits, DEFAULT_AUTH_RATE_LIMITS } from "../../effects/accounts/limits.ts"
import { makeAuthTestApp } from "../support/auth.ts"
import {
  type AuthTestApp,
  createKeyVia,
  expectError,
  expectOk,
  freshEmail,
  freshPhone,
  keyHeaders,
  onboard,
  operator,
  PASSWORD,
  registerVia,
  startService,
  USER_FIELDS,
  verifyEmailVia,
} from "./support.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await startService()
})
afterAll(() => t.api.stop())

const post = (path: string, body: unknown, token?: string) => t.api.call("POST", path, { body, ...(token ? { token } : {}) })

const expectUser = (user: Record<string, unknown>) => {
  expect(Object.keys(user).sort()).toEqual(USER_FIELDS)
  expect(Number.isInteger(user.id)).toBe(true)
  expect(typeof user.email_verified).toBe("boolean")
  expect(typeof user.phone_verified).toBe("boolean")
  expect(user.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
}

const expectTokens = (data: Record<string, any>) => {
  expect(Object.keys(data).sort()).toEqual(["refresh_token", "token", "user"])
  expect(typeof data.token).toBe("string")
  expect(data.token.split(".")).toHaveLength(3)
  expect(typeof data.refresh_token).toBe("string")
  expect(data.refresh_token.length).toBeGreaterThan(20)
  expectUser(data.user)
}

describe("POST /api/auth/register", () => {
  it("answers 200 with {token, refresh_token, user} and sends the verification link", async () => {
    const email = freshEmail()
    const res = await post("/api/auth/register", { name: "Asha", password: PASSWORD, email, company_name: "Kilimo Ltd" })
    const data = expectOk(res, 200)
    expectTokens(data)
    expect(data.user).toMatchObject({ name: "Asha", company_name: "Kilimo Ltd", email, phone_number: null, email_verified: false, phone_verified: false })
    expect(JSON.stringify(res.body)).not.toContain(PASSWORD)
    expect(t.outbox.lastToken(email)).toBeTruthy()
    // The link is {BASE_URL}/verify-email?token=…
    expect(t.outbox.mails.findLast((m) => m.to === email)!.text).toContain(`${t.api.settings.baseUrl}/verify-email?token=`)
  })

  it("with a phone only: normalizes 0… to +255… and sends a 6-digit OTP", async () => {
    const phone = freshPhone()
    const data = expectOk(await post("/api/auth/register", { name: "Juma", password: PASSWORD, phone_number: `0${phone.slice(4)}` }))
    expect(data.user).toMatchObject({ phone_number: phone, email: null })
    expect(t.outbox.lastCode(phone)).toMatch(/^\d{6}$/)
  })

  it("answers 400 VALIDATION_ERROR on invalid bodies, naming the field", async () => {
    expectError(await post("/api/auth/register", { name: "A", password: PASSWORD }), 400, "VALIDATION_ERROR")
    expectError(await post("/api/auth/register", { name: "A", password: "short77", email: freshEmail() }), 400, "VALIDATION_ERROR", "password")
    expectError(await post("/api/auth/register", { password: PASSWORD, email: freshEmail() }), 400, "VALIDATION_ERROR", "name")
    expectError(await post("/api/auth/register", { name: "A", email: freshEmail() }), 400, "VALIDATION_ERROR", "password")
    expectError(await post("/api/auth/register", { name: "A", password: PASSWORD, email: "not-an-email" }), 400, "VALIDATION_ERROR", "email")
    for (const bad of ["+255812345678", "0512345678", "+25571234567", "071234567", "+2547123456789"]) {
      expectError(await post("/api/auth/register", { name: "A", password: PASSWORD, phone_number: bad }), 400, "VALIDATION_ERROR", "phone_number")
    }
    expectError(await post("/api/auth/register", {}), 400, "VALIDATION_ERROR")
  })

  it("accepts a password of exactly 8 characters", async () => {
    expectOk(await post("/api/auth/register", { name: "A", password: "12345678", email: freshEmail() }))
  })

  it("answers 409 CONFLICT on a duplicate email or phone", async () => {
    const phone = freshPhone()
    const s = await registerVia(t, { phone_number: phone })
    expectError(await post("/api/auth/register", { name: "B", password: PASSWORD, email: s.email }), 409, "CONFLICT")
    expectError(await post("/api/auth/register", { name: "B", password: PASSWORD, email: s.email!.toUpperCase() }), 409, "CONFLICT")
    expectError(await post("/api/auth/register", { name: "B", password: PASSWORD, phone_number: phone }), 409, "CONFLICT")
    expectError(await post("/api/auth/register", { name: "B", password: PASSWORD, phone_number: `0${phone.slice(4)}` }), 409, "CONFLICT")
  })
})

describe("POST /api/auth/login", () => {
  it("answers 200 {token, refresh_token, user} for an email identifier", async () => {
    const s = await registerVia(t)
    const data = expectOk(await post("/api/auth/login", { identifier: s.email, password: PASSWORD }))
    expectTokens(data)
    expect(data.user.id).toBe(s.user.id)
    expectOk(await t.api.call("GET", "/api/auth/me", { token: data.token }))
  })

  it("answers 200 for a phone identifier in either form", async () => {
    const phone = freshPhone()
    const s = await registerVia(t, { email: undefined, phone_number: phone })
    expect(expectOk(await post("/api/auth/login", { identifier: phone, password: PASSWORD })).user.id).toBe(s.user.id)
    expect(expectOk(await post("/api/auth/login", { identifier: `0${phone.slice(4)}`, password: PASSWORD })).user.id).toBe(s.user.id)
  })

  it("answers 401 UNAUTHORIZED for a wrong password and an unknown account, with the same message", async () => {
    const s = await registerVia(t)
    const wrong = await post("/api/auth/login", { identifier: s.email, password: "wrong password" })
    expectError(wrong, 401, "UNAUTHORIZED")
    const unknown = await post("/api/auth/login", { identifier: freshEmail(), password: PASSWORD })
    expectError(unknown, 401, "UNAUTHORIZED")
    expect(unknown.body.message).toBe(wrong.body.message)
    expect(unknown.body.errors[0].message).toBe(wrong.body.errors[0].message)
  })

  it("answers 400 VALIDATION_ERROR on a missing identifier or password", async () => {
    expectError(await post("/api/auth/login", { password: PASSWORD }), 400, "VALIDATION_ERROR", "identifier")
    expectError(await post("/api/auth/login", { identifier: freshEmail() }), 400, "VALIDATION_ERROR", "password")
  })
})

describe("POST /api/auth/refresh", () => {
  it("answers 200 {token, refresh_token, user} with a rotated refresh token", async () => {
    const s = await registerVia(t)
    const data = expectOk(await post("/api/auth/refresh", { refresh_token: s.refreshToken }))
    expectTokens(data)
    expect(data.refresh_token).not.toBe(s.refreshToken)
    expectOk(await t.api.call("GET", "/api/auth/me", { token: data.token }))
  })

  it("is single-use: the old token answers 401, and re-use revokes the family", async () => {
    const s = await registerVia(t)
    const next = expectOk(await post("/api/auth/refresh", { refresh_token: s.refreshToken }))
    expectError(await post("/api/auth/refresh", { refresh_token: s.refreshToken }), 401, "UNAUTHORIZED")
    expectError(await post("/api/auth/refresh", { refresh_token: next.refresh_token }), 401, "UNAUTHORIZED")
  })

  it("answers 401 for an unknown token and 400 for a missing one", async () => {
    expectError(await post("/api/auth/refresh", { refresh_token: "rt_nothing" }), 401, "UNAUTHORIZED")
    expectError(await post("/api/auth/refresh", {}), 400, "VALIDATION_ERROR", "refresh_token")
  })

  it("does not take an access token", async () => {
    const s = await registerVia(t)
    expectError(await post("/api/auth/refresh", { refresh_token: s.token }), 401, "UNAUTHORIZED")
  })
})

describe("access tokens", () => {
  it("expire after 60 minutes (401), while the refresh token still works", async () => {
    const s = await registerVia(t)
    t.clock.advance("59 minutes")
    expectOk(await t.api.call("GET", "/api/auth/me", { token: s.token }))
    t.clock.advance("2 minutes")
    expectError(await t.api.call("GET", "/api/auth/me", { token: s.token }), 401, "UNAUTHORIZED")
    const data = expectOk(await post("/api/auth/refresh", { refresh_token: s.refreshToken }))
    expectOk(await t.api.call("GET", "/api/auth/me", { token: data.token }))
  })

  it("a tampered or garbage token answers 401", async () => {
    const s = await registerVia(t)
    const [h, p, sig] = s.token.split(".")
    const flipped = `${h}.${p}.${sig!.slice(0, -2)}${sig!.endsWith("AA") ? "BB" : "AA"}`
    expectError(await t.api.call("GET", "/api/auth/me", { token: flipped }), 401, "UNAUTHORIZED")
    expectError(await t.api.call("GET", "/api/auth/me", { token: "garbage" }), 401, "UNAUTHORIZED")
    expectError(await t.api.call("GET", "/api/auth/me", { headers: { authorization: "Basic abc" } }), 401, "UNAUTHORIZED")
  })
})

describe("GET/PATCH /api/auth/me", () => {
  it("GET answers 200 data: {user}", async () => {
    const s = await registerVia(t, { company_name: "Duka" })
    const data = expectOk(await t.api.call("GET", "/api/auth/me", { token: s.token }))
    expect(Object.keys(data)).toEqual(["user"])
    expectUser(data.user)
    expect(data.user).toMatchObject({ id: s.user.id, email: s.email, company_name: "Duka" })
  })

  it("PATCH changes name and company_name, omitted fields unchanged, and answers data: {user}", async () => {
    const s = await registerVia(t, { company_name: "Old Co" })
    const a = expectOk(await t.api.call("PATCH", "/api/auth/me", { token: s.token, body: { name: "New Name" } }))
    expect(Object.keys(a)).toEqual(["user"])
    expectUser(a.user)
    expect(a.user).toMatchObject({ name: "New Name", company_name: "Old Co" })
    const b = expectOk(await t.api.call("PATCH", "/api/auth/me", { token: s.token, body: { company_name: "New Co" } }))
    expect(b.user).toMatchObject({ name: "New Name", company_name: "New Co" })
    const c = expectOk(await t.api.call("PATCH", "/api/auth/me", { token: s.token, body: {} }))
    expect(c.user).toMatchObject({ name: "New Name", company_name: "New Co" })
    expect(expectOk(await t.api.call("GET", "/api/auth/me", { token: s.token })).user).toMatchObject({ name: "New Name", company_name: "New Co" })
  })

  it("PATCH rejects a wrong type with 400 naming the field", async () => {
    const s = await registerVia(t)
    expectError(await t.api.call("PATCH", "/api/auth/me", { token: s.token, body: { name: 7 } }), 400, "VALIDATION_ERROR", "name")
  })

  it("needs credentials (401)", async () => {
    expectError(await t.api.call("GET", "/api/auth/me"), 401, "UNAUTHORIZED")
    expectError(await t.api.call("PATCH", "/api/auth/me", { body: { name: "x" } }), 401, "UNAUTHORIZED")
  })
})

describe("email verification", () => {
  it("POST /api/auth/email/verify {token} verifies; the token is single-use (then 400 field token)", async () => {
    const s = await registerVia(t)
    const token = t.outbox.lastToken(s.email!)
    expectOk(await post("/api/auth/email/verify", { token }))
    expect(expectOk(await t.api.call("GET", "/api/auth/me", { token: s.token })).user.email_verified).toBe(true)
    expectError(await post("/api/auth/email/verify", { token }), 400, "VALIDATION_ERROR", "token")
  })

  it("a wrong token answers 400 VALIDATION_ERROR with field token", async () => {
    expectError(await post("/api/auth/email/verify", { token: "definitely-not-a-token" }), 400, "VALIDATION_ERROR", "token")
    expectError(await post("/api/auth/email/verify", {}), 400, "VALIDATION_ERROR", "token")
  })

  it("a token older than 24 h answers 400 field token", async () => {
    const s = await registerVia(t)
    const token = t.outbox.lastToken(s.email!)
    t.clock.advance("25 hours")
    expectError(await post("/api/auth/email/verify", { token }), 400, "VALIDATION_ERROR", "token")
  })

  it("needs no credentials", async () => {
    const s = await registerVia(t)
    const res = await t.api.call("POST", "/api/auth/email/verify", { body: { token: t.outbox.lastToken(s.email!) } })
    expectOk(res)
  })

  it("POST /api/auth/email/resend sends a new link to the current email", async () => {
    const s = await registerVia(t)
    const before = t.outbox.mails.filter((m) => m.to === s.email).length
    expectOk(await t.api.call("POST", "/api/auth/email/resend", { token: s.token }))
    expect(t.outbox.mails.filter((m) => m.to === s.email).length).toBe(before + 1)
    expectOk(await post("/api/auth/email/verify", { token: t.outbox.lastToken(s.email!) }))
  })

  it("POST /api/auth/email sends a link to the new address; using it makes the address the account's, verified", async () => {
    const s = await registerVia(t)
    const next = freshEmail()
    expectOk(await post("/api/auth/email", { email: next }, s.token))
    await verifyEmailVia(t, next)
    const user = expectOk(await t.api.call("GET", "/api/auth/me", { token: s.token })).user
    expect(user).toMatchObject({ email: next, email_verified: true })
    // The new address signs in.
    expectOk(await post("/api/auth/login", { identifier: next, password: PASSWORD }))
  })

  it("POST /api/auth/email needs a valid email (400 field email)", async () => {
    const s = await registerVia(t)
    expectError(await post("/api/auth/email", { email: "nope" }, s.token), 400, "VALIDATION_ERROR", "email")
    expectError(await post("/api/auth/email", {}, s.token), 400, "VALIDATION_ERROR", "email")
  })
})

describe("phone verification", () => {
  it("POST /api/auth/phone sends a 6-digit OTP; /phone/verify {code} verifies", async () => {
    const s = await registerVia(t)
    const phone = freshPhone()
    expectOk(await post("/api/auth/phone", { phone_number: phone }, s.token))
    const code = t.outbox.lastCode(phone)
    expect(code).toMatch(/^\d{6}$/)
    expectOk(await post("/api/auth/phone/verify", { code }, s.token))
    expect(expectOk(await t.api.call("GET", "/api/auth/me", { token: s.token })).user).toMatchObject({ phone_number: phone, phone_verified: true })
  })

  it("a wrong, malformed or used code answers 400 VALIDATION_ERROR with field code", async () => {
    const phone = freshPhone()
    const s = await registerVia(t, { email: undefined, phone_number: phone })
    const code = t.outbox.lastCode(phone)
    const wrong = code === "000000" ? "111111" : "000000"
    expectError(await post("/api/auth/phone/verify", { code: wrong }, s.token), 400, "VALIDATION_ERROR", "code")
    expectError(await post("/api/auth/phone/verify", { code: "12ab" }, s.token), 400, "VALIDATION_ERROR", "code")
    expectError(await post("/api/auth/phone/verify", {}, s.token), 400, "VALIDATION_ERROR", "code")
    expectOk(await post("/api/auth/phone/verify", { code }, s.token))
    expectError(await post("/api/auth/phone/verify", { code }, s.token), 400, "VALIDATION_ERROR", "code")
  })

  it("an OTP expires after 10 minutes (400 field code)", async () => {
    const phone = freshPhone()
    const s = await registerVia(t, { email: undefined, phone_number: phone })
    const code = t.outbox.lastCode(phone)
    t.clock.advance("11 minutes")
    expectError(await post("/api/auth/phone/verify", { code }, s.token), 400, "VALIDATION_ERROR", "code")
  })

  it("an OTP allows 5 tries: after 5 wrong ones the right code is refused too", async () => {
    const phone = freshPhone()
    const s = await registerVia(t, { email: undefined, phone_number: phone })
    const code = t.outbox.lastCode(phone)
    const wrong = code === "000000" ? "111111" : "000000"
    for (let i = 0; i < 5; i++) expectError(await post("/api/auth/phone/verify", { code: wrong }, s.token), 400, "VALIDATION_ERROR", "code")
    expectError(await post("/api/auth/phone/verify", { code }, s.token), 400, "VALIDATION_ERROR", "code")
  })

  it("POST /api/auth/phone/resend sends a new code that works", async () => {
    const phone = freshPhone()
    const s = await registerVia(t, { email: undefined, phone_number: phone })
    const before = t.outbox.sms.filter((m) => m.to === phone).length
    expectOk(await t.api.call("POST", "/api/auth/phone/resend", { token: s.token }))
    expect(t.outbox.sms.filter((m) => m.to === phone).length).toBe(before + 1)
    expectOk(await post("/api/auth/phone/verify", { code: t.outbox.lastCode(phone) }, s.token))
  })

  it("POST /api/auth/phone rejects a non-Tanzanian number (400 field phone_number)", async () => {
    const s = await registerVia(t)
    expectError(await post("/api/auth/phone", { phone_number: "+14155550100" }, s.token), 400, "VALIDATION_ERROR", "phone_number")
  })
})

describe("POST /api/auth/google", () => {
  it("answers 503 NOT_CONFIGURED without GOOGLE_CLIENT_ID, and 400 on a missing id_token", async () => {
    expectError(await post("/api/auth/google", { id_token: "eyJhbGciOiJSUzI1NiJ9.e30.sig" }), 503, "NOT_CONFIGURED")
    expectError(await post("/api/auth/google", {}), 400, "VALIDATION_ERROR", "id_token")
  })
})

describe("JWT only on /api/auth/*", () => {
  it("an API key in any of the three forms answers 401 on every JWT endpoint", async () => {
    const acc = await onboard(t)
    const endpoints: Array<[string, string, unknown?]> = [
      ["GET", "/api/auth/me"],
      ["PATCH", "/api/auth/me", { name: "x" }],
      ["POST", "/api/auth/email", { email: freshEmail() }],
      ["POST", "/api/auth/email/resend"],
      ["POST", "/api/auth/phone", { phone_number: freshPhone() }],
      ["POST", "/api/auth/phone/verify", { code: "123456" }],
      ["POST", "/api/auth/phone/resend"],
    ]
    for (const [m, p, body] of endpoints) {
      for (const form of Object.values(keyHeaders)) {
        expectError(await t.api.call(m, p, { headers: form(acc.key), ...(body ? { body } : {}) }), 401, "UNAUTHORIZED")
      }
    }
  })

  it("the unauthenticated endpoints need no credentials", async () => {
    // register, login, google, refresh and email/verify answer without credentials (no 401).
    for (const p of ["/api/auth/register", "/api/auth/login", "/api/auth/google", "/api/auth/refresh", "/api/auth/email/verify"]) {
      const res = await post(p, {})
      expect(res.status, p).not.toBe(401)
    }
  })
})

describe("disabled accounts (operator action)", () => {
  it("answer 403 ACCOUNT_DISABLED at once for tokens and keys, and sign-in is refused", async () => {
    const acc = await onboard(t)
    expectOk(await t.api.call("GET", "/api/billing/balance", { token: acc.key }))
    await operator(t, "disable-account", String(acc.user.id))
    expectError(await t.api.call("GET", "/api/auth/me", { token: acc.token }), 403, "ACCOUNT_DISABLED")
    for (const form of Object.values(keyHeaders)) {
      expectError(await t.api.call("GET", "/api/billing/balance", { headers: form(acc.key) }), 403, "ACCOUNT_DISABLED")
    }
    expectError(await t.api.call("GET", "/api/billing/balance", { token: acc.token }), 403, "ACCOUNT_DISABLED")
    expectError(await t.api.call("GET", "/api/apikeys/", { token: acc.token }), 403, "ACCOUNT_DISABLED")
    const login = await post("/api/auth/login", { identifier: acc.email, password: PASSWORD })
    expectError(login, 403, "ACCOUNT_DISABLED")
    const refresh = await post("/api/auth/refresh", { refresh_token: acc.refreshToken })
    expect([401, 403]).toContain(refresh.status)
    await operator(t, "enable-account", String(acc.user.id))
    expectOk(await t.api.call("GET", "/api/billing/balance", { token: acc.key }))
    expectOk(await t.api.call("GET", "/api/auth/me", { token: acc.token }))
  })
})

describe("secrets never leak", () => {
  it("no password hash or password in any account answer", async () => {
    const s = await registerVia(t)
    const answers = [
      await t.api.call("GET", "/api/auth/me", { token: s.token }),
      await post("/api/auth/login", { identifier: s.email, password: PASSWORD }),
      await t.api.call("PATCH", "/api/auth/me", { token: s.token, body: { name: "N" } }),
    ]
    for (const a of answers) {
      const text = JSON.stringify(a.body)
      expect(text).not.toContain(PASSWORD)
      expect(text).not.toMatch(/password|scrypt|pbkdf2/i)
    }
    // a key created later is not visible here either
    const k = await createKeyVia(t, s.token)
    expect(JSON.stringify((await t.api.call("GET", "/api/auth/me", { token: s.token })).body)).not.toContain(k.key)
  })
})

describe("auth rate limits (default thresholds)", () => {
  let strict: AuthTestApp
  beforeAll(async () => {
    strict = await makeAuthTestApp({ layers: [Layer.succeed(AuthRateLimits, DEFAULT_AUTH_RATE_LIMITS)] })
  })
  afterAll(() => strict.api.stop())

  it("do not stop one client on one IP that registers, verifies and signs in many accounts", async () => {
    // An integration (or an acceptance run) from one address: 60 accounts, each registered,
    // verified through its link and signed into; one account signing in 15 times in a row.
    const accounts = []
    for (let i = 0; i < 60; i++) {
      const email = freshEmail()
      const reg = await strict.api.call("POST", "/api/auth/register", { body: { name: "Many", password: PASSWORD, email } })
      expect(reg.status, JSON.stringify(reg.body)).toBe(200)
      const token = strict.outbox.lastToken(email)
      expect((await strict.api.call("POST", "/api/auth/email/verify", { body: { token } })).status).toBe(200)
      expect((await strict.api.call("POST", "/api/auth/login", { body: { identifier: email, password: PASSWORD } })).status).toBe(200)
      accounts.push(email)
    }
    for (let i = 0; i < 15; i++) {
      const res = await strict.api.call("POST", "/api/auth/login", { body: { identifier: accounts[0], password: PASSWORD } })
      expect(res.status, `sign-in ${i + 1}: ${JSON.stringify(res.body)}`).toBe(200)
    }
  })

  it("10 login tries per identifier per 15 min, then 429 RATE_LIMITED with Retry-After", async () => {
    const email = freshEmail()
    for (let i = 0; i < 10; i++) {
      expectError(await strict.api.call("POST", "/api/auth/login", { body: { identifier: email, password: "wrong-pass" } }), 401, "UNAUTHORIZED")
    }
    const limited = await strict.api.call("POST", "/api/auth/login", { body: { identifier: email, password: "wrong-pass" } })
    expectError(limited, 429, "RATE_LIMITED")
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
    strict.clock.advance("16 minutes")
    expectError(await strict.api.call("POST", "/api/auth/login", { body: { identifier: email, password: "wrong-pass" } }), 401, "UNAUTHORIZED")
  })
})
