/**
 * Email links and SMS codes: verify, change, resend; used, expired, forged and wrong proofs;
 * 5 tries per code; what is stored (hashes only).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signJwt } from "../../effects/auth/jwt.ts"
import { Database } from "../../effects/ports/Database.ts"
import { type AuthTestApp, freshEmail, freshPhone, makeAuthTestApp, register } from "../support/auth.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await makeAuthTestApp()
})
afterAll(() => t.api.stop())

const verifyEmail = (token: unknown) => t.api.call("POST", "/api/auth/email/verify", { body: { token } })
const me = (token: string) => t.api.call("GET", "/api/auth/me", { token }).then((r) => r.body.data.user)
const expectTokenRejected = (res: { status: number; body: any }) => {
  expect(res.status).toBe(400)
  expect(res.body.errors[0]).toMatchObject({ field: "token", code: "VALIDATION_ERROR" })
}
const expectCodeRejected = (res: { status: number; body: any }) => {
  expect(res.status).toBe(400)
  expect(res.body.errors[0]).toMatchObject({ field: "code", code: "VALIDATION_ERROR" })
}

describe("email verification", () => {
  it("verifies with the token of the link (no credentials needed), once", async () => {
    const a = await register(t.api)
    const token = t.outbox.lastToken(a.email)
    const res = await verifyEmail(token)
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual({ email: a.email, email_verified: true })
    expect((await me(a.token)).email_verified).toBe(true)
    const again = await verifyEmail(token)
    expectTokenRejected(again)
    expect(again.body.errors[0].message).toMatch(/already used/)
  })

  it("rejects an expired link (24 h) and a superseded one", async () => {
    const a = await register(t.api)
    const first = t.outbox.lastToken(a.email)
    const resent = await t.api.call("POST", "/api/auth/email/resend", { token: a.token })
    expect(resent.status).toBe(200)
    expect(resent.body.data.email).toBe(a.email)
    const second = t.outbox.lastToken(a.email)
    expect(second).not.toBe(first)
    expectTokenRejected(await verifyEmail(first))
    t.clock.advance("24 hours")
    t.clock.advance("1 second")
    expectTokenRejected(await verifyEmail(second))
    expect((await me((await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email, password: a.password } })).body.data.token)).email_verified)
      .toBe(false)
  })

  it("rejects forged, tampered and foreign tokens", async () => {
    const a = await register(t.api)
    const real = t.outbox.lastToken(a.email)
    const [h, p, s] = real.split(".")
    const now = Math.floor(t.clock.now() / 1000)
    const otherKey = await t.api.run(signJwt(new TextEncoder().encode("some-other-key-of-enough-length!"), {
      sub: String(a.user.id),
      typ: "email_verify",
      jti: "0".repeat(32),
      iat: now,
      exp: now + 3600,
    }))
    // Correctly signed but of another type (an access token) or with an unknown jti.
    const unknownJti = await t.api.run(signJwt(t.api.settings.jwtSecret, { sub: String(a.user.id), typ: "email_verify", jti: "f".repeat(32), iat: now, exp: now + 3600 }))
    for (const bad of [otherKey, a.token, unknownJti, `${h}.${p}.${s!.slice(0, -2)}xx`, `${h}.${p}`, "garbage"]) expectTokenRejected(await verifyEmail(bad))
    expect((await verifyEmail(real)).status).toBe(200)
  })

  it.each([
    ["missing", {}],
    ["wrong type", { token: 12 }],
    ["empty", { token: "" }],
    ["too long", { token: "x".repeat(2049) }],
  ])("answers 400 for a %s token", async (_, body) => {
    expectTokenRejected(await t.api.call("POST", "/api/auth/email/verify", { body }))
  })

  it("changes the email only when the new address is verified", async () => {
    const a = await register(t.api)
    await verifyEmail(t.outbox.lastToken(a.email))
    const next = freshEmail()
    const res = await t.api.call("POST", "/api/auth/email", { token: a.token, body: { email: next.toUpperCase() } })
    expect(res.status).toBe(200)
    expect(res.body.data.email).toBe(next)
    expect(new Date(res.body.data.expires_at).getTime()).toBeGreaterThan(t.clock.now() + 23 * 3600_000)
    // Until verified, the account keeps its old, verified address.
    expect(await me(a.token)).toMatchObject({ email: a.email, email_verified: true })
    // Resend goes to the address being verified.
    await t.api.call("POST", "/api/auth/email/resend", { token: a.token })
    expect(t.outbox.mails.at(-1)!.to).toBe(next)
    expect((await verifyEmail(t.outbox.lastToken(next))).status).toBe(200)
    expect(await me(a.token)).toMatchObject({ email: next, email_verified: true })
    // The old address no longer signs in; the new one does.
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email, password: a.password } })).status).toBe(401)
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: next, password: a.password } })).status).toBe(200)
  })

  it("adds an email to a phone-only account", async () => {
    const phone = freshPhone()
    const reg = await t.api.call("POST", "/api/auth/register", { body: { name: "P", password: "password123", phone_number: phone } })
    const token = reg.body.data.token
    const noEmail = await t.api.call("POST", "/api/auth/email/resend", { token })
    expect(noEmail.status).toBe(400)
    expect(noEmail.body.errors[0].field).toBe("email")
    const email = freshEmail()
    expect((await t.api.call("POST", "/api/auth/email", { token, body: { email } })).status).toBe(200)
    expect((await verifyEmail(t.outbox.lastToken(email))).status).toBe(200)
    expect(await me(token)).toMatchObject({ email, email_verified: true, phone_number: phone })
  })

  it("answers 409 for an email of another account, for re-verifying a verified one, and when someone else got there first", async () => {
    const a = await register(t.api)
    const b = await register(t.api)
    const taken = await t.api.call("POST", "/api/auth/email", { token: a.token, body: { email: b.email } })
    expect(taken.status).toBe(409)
    expect(taken.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "email" })
    await verifyEmail(t.outbox.lastToken(a.email))
    const same = await t.api.call("POST", "/api/auth/email", { token: a.token, body: { email: a.email } })
    expect(same.status).toBe(409)
    const resend = await t.api.call("POST", "/api/auth/email/resend", { token: a.token })
    expect(resend.status).toBe(409)
    // Race: a asks for an address, c registers with it before a verifies.
    const contested = freshEmail()
    await t.api.call("POST", "/api/auth/email", { token: a.token, body: { email: contested } })
    const link = t.outbox.lastToken(contested)
    await register(t.api, { email: contested })
    const late = await verifyEmail(link)
    expect(late.status).toBe(409)
    expect(late.body.errors[0].code).toBe("CONFLICT")
    expect((await me(a.token)).email).toBe(a.email)
  })

  it.each([
    ["missing", {}],
    ["bad", { email: "nope" }],
    ["wrong type", { email: ["a@b.co"] }],
  ])("POST /api/auth/email answers 400 for a %s email", async (_, body) => {
    const a = await register(t.api)
    const res = await t.api.call("POST", "/api/auth/email", { token: a.token, body })
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe("email")
  })

  it("answers 502 PROVIDER_ERROR when the link cannot be sent on request", async () => {
    const a = await register(t.api)
    t.outbox.failing = true
    try {
      const res = await t.api.call("POST", "/api/auth/email/resend", { token: a.token })
      expect(res.status).toBe(502)
      expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
    } finally {
      t.outbox.failing = false
    }
  })

  it("stores only a hash of the link's token", async () => {
    const a = await register(t.api)
    const token = t.outbox.lastToken(a.email)
    const rows = await t.api.run(Database.use((db) => db.query<{ token_hash: string }>("SELECT token_hash FROM email_verifications WHERE user_id = $1", [a.user.id])))
    expect(rows).toHaveLength(1)
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(token).not.toContain(rows[0]!.token_hash)
  })

  it("serves the page the link opens, which posts the token", async () => {
    const page = await t.api.call("GET", "/verify-email?token=abc")
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toContain("text/html")
    expect(String(page.body)).toContain("/api/auth/email/verify")
  })
})

describe("phone verification", () => {
  const setPhone = (token: string, phone_number: unknown) => t.api.call("POST", "/api/auth/phone", { token, body: { phone_number } })
  const verifyCode = (token: string, code: unknown) => t.api.call("POST", "/api/auth/phone/verify", { token, body: { code } })

  it("sets a number (0… form), verifies it with the SMS code and answers the user", async () => {
    const a = await register(t.api)
    const phone = freshPhone()
    const res = await setPhone(a.token, `0${phone.slice(4)}`)
    expect(res.status).toBe(200)
    expect(res.body.data.phone_number).toBe(phone)
    const code = t.outbox.lastCode(phone)
    expect(t.outbox.sms.at(-1)!.options.apiKey).toBeUndefined() // the platform's own key
    expect((await me(a.token)).phone_number).toBeNull()
    const ok = await verifyCode(a.token, code)
    expect(ok.status).toBe(200)
    expect(ok.body.data.user).toMatchObject({ phone_number: phone, phone_verified: true })
    expectCodeRejected(await verifyCode(a.token, code)) // used
    // The phone now signs in.
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: phone, password: a.password } })).status).toBe(200)
  })

  it("verifies the number given at registration", async () => {
    const phone = freshPhone()
    const reg = await t.api.call("POST", "/api/auth/register", { body: { name: "P", password: "password123", phone_number: phone } })
    const token = reg.body.data.token
    expect((await verifyCode(token, t.outbox.lastCode(phone))).body.data.user.phone_verified).toBe(true)
  })

  it("allows 5 tries per code, then requires a new one", async () => {
    const a = await register(t.api)
    const phone = freshPhone()
    await setPhone(a.token, phone)
    const code = t.outbox.lastCode(phone)
    const wrong = code === "000000" ? "111111" : "000000"
    for (let i = 0; i < 5; i++) {
      const res = await verifyCode(a.token, wrong)
      expectCodeRejected(res)
    }
    const locked = await verifyCode(a.token, code)
    expectCodeRejected(locked)
    expect(locked.body.errors[0].message).toMatch(/too many/)
    // A resent code works.
    const resent = await t.api.call("POST", "/api/auth/phone/resend", { token: a.token })
    expect(resent.status).toBe(200)
    expect(resent.body.data.phone_number).toBe(phone)
    expect((await verifyCode(a.token, t.outbox.lastCode(phone))).status).toBe(200)
  })

  it("rejects an expired code (10 min) and a superseded one", async () => {
    const a = await register(t.api)
    const phone = freshPhone()
    await setPhone(a.token, phone)
    const first = t.outbox.lastCode(phone)
    await t.api.call("POST", "/api/auth/phone/resend", { token: a.token })
    const second = t.outbox.lastCode(phone)
    if (first !== second) expectCodeRejected(await verifyCode(a.token, first))
    t.clock.advance("10 minutes")
    t.clock.advance("1 second")
    const expired = await verifyCode(a.token, second)
    expectCodeRejected(expired)
    expect(expired.body.errors[0].message).toMatch(/expired/)
  })

  it.each([
    ["missing", undefined],
    ["wrong type", 123456],
    ["5 digits", "12345"],
    ["7 digits", "1234567"],
    ["letters", "12a456"],
  ])("answers 400 on code for a %s code, without using a try", async (_, code) => {
    const a = await register(t.api)
    const phone = freshPhone()
    await setPhone(a.token, phone)
    expectCodeRejected(await t.api.call("POST", "/api/auth/phone/verify", { token: a.token, body: code === undefined ? {} : { code } }))
    const [row] = await t.api.run(Database.use((db) => db.query<{ attempts: number }>("SELECT attempts FROM phone_verifications WHERE user_id = $1", [a.user.id])))
    expect(row!.attempts).toBe(0)
  })

  it("answers 400 when no code is pending", async () => {
    const a = await register(t.api)
    const res = await verifyCode(a.token, "123456")
    expectCodeRejected(res)
    const resend = await t.api.call("POST", "/api/auth/phone/resend", { token: a.token })
    expect(resend.status).toBe(400)
    expect(resend.body.errors[0].field).toBe("phone_number")
  })

  it.each([
    ["Kenyan", "+254712345678"],
    ["08 prefix", "0812345678"],
    ["9 digits", "071234567"],
    ["wrong type", 712345678],
  ])("answers 400 for a %s phone number", async (_, phone) => {
    const a = await register(t.api)
    const res = await setPhone(a.token, phone)
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field: "phone_number", code: "VALIDATION_ERROR" })
  })

  it("answers 409 for another account's number and for re-verifying a verified one", async () => {
    const phone = freshPhone()
    await register(t.api, { phone_number: phone })
    const a = await register(t.api)
    const taken = await setPhone(a.token, phone)
    expect(taken.status).toBe(409)
    expect(taken.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "phone_number" })
    const mine = freshPhone()
    await setPhone(a.token, mine)
    await verifyCode(a.token, t.outbox.lastCode(mine))
    expect((await setPhone(a.token, mine)).status).toBe(409)
    expect((await t.api.call("POST", "/api/auth/phone/resend", { token: a.token })).status).toBe(409)
  })

  it("stores codes as keyed hashes only", async () => {
    const a = await register(t.api)
    const phone = freshPhone()
    await setPhone(a.token, phone)
    const code = t.outbox.lastCode(phone)
    const [row] = await t.api.run(Database.use((db) => db.query<{ code_hash: string }>("SELECT code_hash FROM phone_verifications WHERE user_id = $1", [a.user.id])))
    expect(row!.code_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(row!.code_hash).not.toContain(code)
  })

  it("requires a user access token", async () => {
    expect((await t.api.call("POST", "/api/auth/phone", { body: { phone_number: freshPhone() } })).status).toBe(401)
    expect((await t.api.call("POST", "/api/auth/phone/verify", { body: { code: "123456" } })).status).toBe(401)
    expect((await t.api.call("POST", "/api/auth/phone/resend")).status).toBe(401)
    expect((await t.api.call("POST", "/api/auth/email", { body: { email: freshEmail() } })).status).toBe(401)
  })
})
