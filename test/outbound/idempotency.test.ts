/**
 * Idempotency-Key on sends and batches: the same key and body within 24 h answer the first
 * response without a new send or charge; another body is 409; concurrent twins send once; a
 * send that failed as a whole frees its key; after 24 h the key is new again.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { TestApp } from "../support/app.ts"
import { type ShiftedClock, shiftedClock } from "../support/clock.ts"
import {
  balance,
  expectLedgerConsistent,
  expectNothingWritten,
  fund,
  fundedAccount,
  makeOutboundApp,
  movements,
  query,
  rcpt,
  send,
  sendBatch,
  startRelay,
  type TestRelay,
} from "./support.ts"

let relay: TestRelay
let api: TestApp
let clock: ShiftedClock
beforeAll(async () => {
  relay = await startRelay()
  clock = shiftedClock()
  api = await makeOutboundApp({ relayUrl: relay.url, clock })
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
})
beforeEach(() => relay.reset())
afterEach(() => clock.thaw())

let k = 0
const key = () => `order-${++k}-${Math.random().toString(16).slice(2)}`

describe("POST /emails with Idempotency-Key", () => {
  it("replays the first answer for the same key and body: no second send, no second charge", async () => {
    const a = await fundedAccount(api, 100)
    const body = { to: [rcpt()], subject: "Receipt 17", text_body: "t" }
    const k1 = key()
    const first = await send(api, a, body, { "idempotency-key": k1 })
    expect(first.status).toBe(201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    // Same body, keys in another order.
    const again = await send(api, a, { text_body: "t", subject: "Receipt 17", to: body.to }, { "idempotency-key": k1 })
    expect(again.status).toBe(201)
    expect(again.body.data).toEqual(first.body.data)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(relay.received).toHaveLength(1)
    expect(await balance(api, a.userId)).toBe(95)

    // Another body under the same key: 409, nothing written.
    const other = await send(api, a, { ...body, subject: "Receipt 18" }, { "idempotency-key": k1 })
    expect(other.status).toBe(409)
    expect(other.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "Idempotency-Key" })
    expect(relay.received).toHaveLength(1)
    expect(await balance(api, a.userId)).toBe(95)

    // Without the header, sends are never deduplicated (SPEC.md From rule 5).
    expect((await send(api, a, body)).status).toBe(201)
    expect((await send(api, a, body)).status).toBe(201)
    expect(relay.received).toHaveLength(3)
    expect(await balance(api, a.userId)).toBe(85)
  })

  it("keys are per account", async () => {
    const a = await fundedAccount(api, 100)
    const b = await fundedAccount(api, 100)
    const k1 = key()
    const body = { to: [rcpt()], subject: "s", text_body: "t" }
    const x = await send(api, a, body, { "idempotency-key": k1 })
    const y = await send(api, b, body, { "idempotency-key": k1 })
    expect(y.status).toBe(201)
    expect(y.body.data.id).not.toBe(x.body.data.id)
    expect(relay.received).toHaveLength(2)
  })

  it("concurrent twins send once; the twin answers the first result or 409 while it is in flight", async () => {
    const a = await fundedAccount(api, 100)
    const k1 = key()
    const body = { to: [rcpt()], subject: "twin", text_body: "t" }
    const results = await Promise.all(Array.from({ length: 5 }, () => send(api, a, body, { "idempotency-key": k1 })))
    const statuses = results.map((r) => r.status).sort()
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true)
    const ids = new Set(results.filter((r) => r.status === 201).map((r) => r.body.data.id))
    expect(ids.size).toBe(1)
    expect(relay.received).toHaveLength(1)
    expect(await balance(api, a.userId)).toBe(95)
    await expectLedgerConsistent(api)
  })

  it("a refused request does not use up its key", async () => {
    const a = await fundedAccount(api, 4)
    const k1 = key()
    const body = { to: [rcpt()], subject: "s", text_body: "t" }
    expect((await send(api, a, body, { "idempotency-key": k1 })).status).toBe(402)
    await expectNothingWritten(api, a.userId)
    await fund(api, a.userId, 1)
    expect((await send(api, a, body, { "idempotency-key": k1 })).status).toBe(201)
  })

  it("a send the provider refused as a whole frees its key: the retry sends", async () => {
    const a = await fundedAccount(api, 100)
    const k1 = key()
    const body = { to: [rcpt()], subject: "s", text_body: "t" }
    relay.behaviour.dataCode = 451
    expect((await send(api, a, body, { "idempotency-key": k1 })).status).toBe(502)
    relay.behaviour.dataCode = null
    const retry = await send(api, a, body, { "idempotency-key": k1 })
    expect(retry.status).toBe(201)
    expect(retry.headers.get("idempotent-replayed")).toBeNull()
    expect(relay.received).toHaveLength(1)
    expect(await balance(api, a.userId)).toBe(95)
  })

  it("lives 24 hours", async () => {
    const a = await fundedAccount(api, 100)
    const k1 = key()
    const body = { to: [rcpt()], subject: "s", text_body: "t" }
    const first = await send(api, a, body, { "idempotency-key": k1 })
    clock.advance("23 hours")
    expect((await send(api, a, body, { "idempotency-key": k1 })).body.data.id).toBe(first.body.data.id)
    clock.advance("61 minutes")
    const later = await send(api, a, body, { "idempotency-key": k1 })
    expect(later.status).toBe(201)
    expect(later.body.data.id).not.toBe(first.body.data.id)
    expect(relay.received).toHaveLength(2)
    const keys = await query(api, "SELECT * FROM outbound_idempotency_keys WHERE user_id = $1", [a.userId])
    expect(keys).toHaveLength(1)
  })
})

describe("POST /emails/batch with Idempotency-Key", () => {
  it("replays the batch answer; the same key on /emails is a different request (409)", async () => {
    const a = await fundedAccount(api, 100)
    const k1 = key()
    const body = { to: [rcpt(), rcpt()], subject: "s", text_body: "t" }
    const first = await sendBatch(api, a, body, { "idempotency-key": k1 })
    expect(first.status).toBe(201)
    const again = await sendBatch(api, a, body, { "idempotency-key": k1 })
    expect(again.status).toBe(201)
    expect(again.body.data).toEqual(first.body.data)
    expect(relay.received).toHaveLength(2)
    expect(await balance(api, a.userId)).toBe(90)
    expect((await send(api, a, body, { "idempotency-key": k1 })).status).toBe(409)
    expect(await movements(api, a.userId)).toHaveLength(1)
  })
})
