/**
 * The send rate (2 calls per second per account, burst 2, /emails and /emails/batch together):
 * 429 RATE_LIMITED with Retry-After, RateLimit-* headers on sends, nothing written or charged
 * when limited. The clock is frozen and moved by the test, so milliseconds are exact.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { DEFAULT_OUTBOUND_RATE_LIMIT } from "../../effects/outbound/limits.ts"
import type { TestApp } from "../support/app.ts"
import { type ShiftedClock, shiftedClock } from "../support/clock.ts"
import { balance, fundedAccount, makeOutboundApp, query, rcpt, send, sendBatch, startRelay, type TestRelay } from "./support.ts"

let relay: TestRelay
let api: TestApp
let clock: ShiftedClock
beforeAll(async () => {
  relay = await startRelay()
  clock = shiftedClock()
  api = await makeOutboundApp({ relayUrl: relay.url, clock, rate: DEFAULT_OUTBOUND_RATE_LIMIT })
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
})
beforeEach(() => clock.freeze())
afterEach(() => clock.thaw())

const body = () => ({ to: [rcpt()], subject: "s", text_body: "t" })
const messages = async (userId: number) =>
  (await query<{ n: number }>(api, "SELECT count(*)::int8 AS n FROM outbound_messages WHERE user_id = $1", [userId]))[0]!.n

describe("2 sends per second, burst 2", () => {
  it("allows two at once, then 429 with Retry-After; one more every 500 ms", async () => {
    const a = await fundedAccount(api, 100)
    const first = await send(api, a, body())
    expect(first.status).toBe(201)
    expect(first.headers.get("ratelimit-limit")).toBe("2")
    expect(first.headers.get("ratelimit-remaining")).toBe("1")
    const second = await send(api, a, body())
    expect(second.status).toBe(201)
    expect(second.headers.get("ratelimit-remaining")).toBe("0")
    expect(second.headers.get("ratelimit-reset")).toBe("1")

    const limited = await send(api, a, body())
    expect(limited.status).toBe(429)
    expect(limited.body.errors[0].code).toBe("RATE_LIMITED")
    expect(limited.headers.get("retry-after")).toBe("1")
    expect(limited.headers.get("ratelimit-limit")).toBe("2")
    expect(limited.headers.get("ratelimit-remaining")).toBe("0")
    expect(limited.headers.get("ratelimit-reset")).toBe("1")
    expect(await messages(a.userId)).toBe(2)
    expect(await balance(api, a.userId)).toBe(90)

    clock.advance("499 millis")
    expect((await send(api, a, body())).status).toBe(429)
    clock.advance("1 millis")
    expect((await send(api, a, body())).status).toBe(201)
    expect((await send(api, a, body())).status).toBe(429)
    clock.advance("1 second")
    expect((await send(api, a, body())).status).toBe(201)
    expect((await send(api, a, body())).status).toBe(201)
    expect((await send(api, a, body())).status).toBe(429)
    expect(await balance(api, a.userId)).toBe(75)
  })

  it("a batch is one call, and shares the bucket with /emails", async () => {
    const a = await fundedAccount(api, 1000)
    const batch = await sendBatch(api, a, { to: Array.from({ length: 10 }, () => rcpt()), subject: "s", text_body: "t" })
    expect(batch.status).toBe(201)
    expect(batch.headers.get("ratelimit-remaining")).toBe("1")
    expect((await send(api, a, body())).status).toBe(201)
    const limited = await sendBatch(api, a, { to: [rcpt()], subject: "s", text_body: "t" })
    expect(limited.status).toBe(429)
    expect(await messages(a.userId)).toBe(11)
  })

  it("is per account, and refused requests do not spend it", async () => {
    const a = await fundedAccount(api, 100)
    const b = await fundedAccount(api, 100)
    for (let i = 0; i < 5; i++) expect((await send(api, a, { to: ["bad"], subject: "s", text_body: "t" })).status).toBe(400)
    expect((await send(api, a, { ...body(), from_address: "x@gmail.com" })).status).toBe(400)
    expect((await send(api, a, body())).status).toBe(201)
    expect((await send(api, a, body())).status).toBe(201)
    expect((await send(api, a, body())).status).toBe(429)
    expect((await send(api, b, body())).status).toBe(201)
  })
})
