/**
 * The generic RateLimiter (a GCRA bucket per key in PostgreSQL) and the limits on the auth
 * endpoints: 429 RATE_LIMITED with Retry-After, per IP and per identifier, time moved by the
 * test clock instead of sleeping.
 */
import { Effect, Layer } from "effect"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { AuthRateLimits, DEFAULT_AUTH_RATE_LIMITS } from "../../effects/accounts/limits.ts"
import { Database } from "../../effects/ports/Database.ts"
import { type RateLimit, RateLimiter } from "../../effects/ratelimit/service.ts"
import { type AuthTestApp, freshEmail, freshPhone, makeAuthTestApp, PASSWORD, register } from "../support/auth.ts"

let t: AuthTestApp // the production defaults
let small: AuthTestApp // tiny limits, to reach each one quickly
beforeAll(async () => {
  ;[t, small] = await Promise.all([
    makeAuthTestApp({ layers: [Layer.succeed(AuthRateLimits, DEFAULT_AUTH_RATE_LIMITS)] }),
    makeAuthTestApp({
      layers: [Layer.succeed(AuthRateLimits, {
        ...DEFAULT_AUTH_RATE_LIMITS,
        loginPerIp: { limit: 4, window: "15 minutes" },
        registerPerIp: { limit: 3, window: "1 hour" },
        googlePerIp: { limit: 1, window: "15 minutes" },
        refreshPerIp: { limit: 1000, window: "15 minutes" },
        emailVerifyPerIp: { limit: 2, window: "15 minutes" },
        phoneVerifyPerAccount: { limit: 2, window: "15 minutes" },
      })],
    }),
  ])
})
afterAll(() => Promise.all([t.api.stop(), small.api.stop()]))

const take = (app: AuthTestApp, key: string, limit: RateLimit, cost?: number) =>
  app.api.run(Effect.result(Effect.gen(function*() {
    const limiter = yield* RateLimiter
    return yield* limiter.take(key, limit, cost)
  })))

const expect429 = (res: { status: number; headers: Headers; body: any }) => {
  expect(res.status).toBe(429)
  expect(res.body.errors[0].code).toBe("RATE_LIMITED")
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
}

describe("RateLimiter", () => {
  // These count milliseconds: the clock moves only when the test says so.
  beforeEach(() => t.clock.freeze())
  afterEach(() => t.clock.thaw())

  it("allows a burst, then one per interval, and says how long to wait", async () => {
    const limit: RateLimit = { limit: 2, window: "1 second", burst: 2 } // the outbound send rate
    const a = await take(t, "test:burst", limit)
    expect(a).toMatchObject({ _tag: "Success", success: { limit: 2, remaining: 1 } })
    expect((await take(t, "test:burst", limit))._tag).toBe("Success")
    const denied = await take(t, "test:burst", limit)
    expect(denied._tag).toBe("Failure")
    expect(denied).toMatchObject({ failure: { _tag: "RateLimited", retry_after_seconds: 1 } })
    t.clock.advance("500 millis")
    expect((await take(t, "test:burst", limit))._tag).toBe("Success")
    expect((await take(t, "test:burst", limit))._tag).toBe("Failure")
    // Other keys have their own bucket.
    expect((await take(t, "test:burst:other", limit))._tag).toBe("Success")
  })

  it("reports Retry-After for slow windows (10 per 15 minutes: 90 s per request)", async () => {
    const limit: RateLimit = { limit: 10, window: "15 minutes" }
    for (let i = 0; i < 10; i++) expect((await take(t, "test:slow", limit))._tag).toBe("Success")
    const denied = await take(t, "test:slow", limit)
    expect(denied).toMatchObject({ _tag: "Failure", failure: { retry_after_seconds: 90 } })
    t.clock.advance("60 seconds")
    expect(await take(t, "test:slow", limit)).toMatchObject({ failure: { retry_after_seconds: 30 } })
    t.clock.advance("30 seconds")
    expect((await take(t, "test:slow", limit))._tag).toBe("Success")
  })

  it("takes a cost of several tokens at once", async () => {
    const limit: RateLimit = { limit: 5, window: "5 seconds" }
    expect(await take(t, "test:cost", limit, 3)).toMatchObject({ success: { remaining: 2 } })
    expect((await take(t, "test:cost", limit, 3))._tag).toBe("Failure")
    expect((await take(t, "test:cost", limit, 2))._tag).toBe("Success")
  })

  it("never lets concurrent requests take more than the bucket holds", async () => {
    const limit: RateLimit = { limit: 5, window: "1 hour" }
    const results = await Promise.all(Array.from({ length: 20 }, () => take(t, "test:concurrent", limit)))
    expect(results.filter((r) => r._tag === "Success")).toHaveLength(5)
  })

  it("reset fills a bucket; purge drops full ones", async () => {
    const limit: RateLimit = { limit: 1, window: "1 minute" }
    await take(t, "test:reset", limit)
    expect((await take(t, "test:reset", limit))._tag).toBe("Failure")
    await t.api.run(RateLimiter.use((l) => l.reset("test:reset")))
    expect((await take(t, "test:reset", limit))._tag).toBe("Success")
    await take(t, "test:purge", { limit: 1, window: "1 second" } satisfies RateLimit)
    t.clock.advance("2 seconds")
    const purged = await t.api.run(RateLimiter.use((l) => l.purge()))
    expect(purged).toBeGreaterThanOrEqual(1)
    const left = await t.api.run(Database.use((db) => db.query("SELECT key FROM rate_limits WHERE key = 'test:purge'")))
    expect(left).toHaveLength(0)
  })
})

describe("auth endpoint limits", () => {
  it("login: 10 tries per identifier per 15 minutes, then 429 with Retry-After; other identifiers unaffected", async () => {
    const a = await register(t.api)
    for (let i = 0; i < 10; i++) {
      const res = await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email, password: "wrong password" } })
      expect(res.status).toBe(401)
    }
    // Even the right password is refused now: the limit protects the identifier.
    const limited = await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email.toUpperCase(), password: PASSWORD } })
    expect429(limited)
    // 90 s per try at 10 per 15 minutes, less the (real) time the ten tries took.
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(80)
    expect(Number(limited.headers.get("retry-after"))).toBeLessThanOrEqual(90)
    const other = await register(t.api)
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: other.email, password: PASSWORD } })).status).toBe(200)
    t.clock.advance("90 seconds")
    expect((await t.api.call("POST", "/api/auth/login", { body: { identifier: a.email, password: PASSWORD } })).status).toBe(200)
  })

  it("login: per IP across identifiers", async () => {
    const answers = []
    for (let i = 0; i < 5; i++) {
      answers.push(await small.api.call("POST", "/api/auth/login", { body: { identifier: freshEmail(), password: "whatever1" } }))
    }
    expect(answers.slice(0, 4).map((r) => r.status)).toEqual([401, 401, 401, 401])
    expect429(answers[4]!)
  })

  it("register: per IP", async () => {
    const statuses = []
    for (let i = 0; i < 4; i++) {
      const res = await small.api.call("POST", "/api/auth/register", { body: { name: "R", password: PASSWORD, email: freshEmail() } })
      statuses.push(res.status)
      if (i === 3) expect429(res)
    }
    expect(statuses).toEqual([200, 200, 200, 429])
  })

  it("email verify: per IP", async () => {
    const r1 = await small.api.call("POST", "/api/auth/email/verify", { body: { token: "x.y.z" } })
    const r2 = await small.api.call("POST", "/api/auth/email/verify", { body: { token: "x.y.z" } })
    expect([r1.status, r2.status]).toEqual([400, 400])
    expect429(await small.api.call("POST", "/api/auth/email/verify", { body: { token: "x.y.z" } }))
  })

  it("google: per IP", async () => {
    await small.api.call("POST", "/api/auth/google", { body: { id_token: "a.b.c" } })
    expect429(await small.api.call("POST", "/api/auth/google", { body: { id_token: "a.b.c" } }))
  })

  it("phone verify: per account, on top of the 5 tries per code", async () => {
    const a = await register(t.api)
    await t.api.call("POST", "/api/auth/phone", { token: a.token, body: { phone_number: freshPhone() } })
    const tries = []
    for (let i = 0; i < 11; i++) tries.push((await t.api.call("POST", "/api/auth/phone/verify", { token: a.token, body: { code: "000000" } })).status)
    // 5 wrong tries, then "request a new code" (still 400), then the account limit of 10 per 15 min.
    expect(tries.slice(0, 10).every((s) => s === 400)).toBe(true)
    expect(tries[10]).toBe(429)
  })

  it("verification sends: 5 per account per hour (SMS costs money)", async () => {
    const a = await register(t.api)
    const statuses = [(await t.api.call("POST", "/api/auth/phone", { token: a.token, body: { phone_number: freshPhone() } })).status]
    for (let i = 0; i < 5; i++) statuses.push((await t.api.call("POST", "/api/auth/phone/resend", { token: a.token })).status)
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
    // The email channel shares the account's budget.
    expect429(await t.api.call("POST", "/api/auth/email/resend", { token: a.token }))
    t.clock.advance("12 minutes")
    expect((await t.api.call("POST", "/api/auth/phone/resend", { token: a.token })).status).toBe(200)
  })

  it("verification sends: 5 per destination per hour, whichever account asks", async () => {
    const phone = freshPhone()
    const statuses = []
    for (let i = 0; i < 6; i++) {
      const acc = await register(t.api)
      statuses.push((await t.api.call("POST", "/api/auth/phone", { token: acc.token, body: { phone_number: phone } })).status)
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
  })
})
