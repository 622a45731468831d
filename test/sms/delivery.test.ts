/**
 * SMS sends, driven one worker round at a time under TestClock, against the msw SMS provider.
 */
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { SmsDeliveries } from "../../effects/sms/delivery.ts"
import type { SmsDeliveryRow } from "../../effects/sms/schema.ts"
import { SMS_MAX_CHARS, smsSummary } from "../../effects/sms/summary.ts"
import { smsWorkerSpec } from "../../src/workers/sms.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessageEffect } from "../support/inbound-fixtures.ts"
import { makeSmsProvider } from "../support/sms-provider.ts"

const provider = makeSmsProvider()
let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false, settings: provider.settings, infrastructure: provider.layer })
})
afterAll(() => api?.stop())

const KEY = "sk_test_0123456789abcdef"

const setup = async (phone = "0754000111") => {
  const account = await createAccount(api)
  const addressId = await createAddress(api, account.userId)
  const res = await api.call("POST", "/api/sms/notifications", {
    token: account.apiKey,
    body: { address_id: addressId, phone_number: phone, provider_key: KEY },
  })
  expect(res.status).toBe(201)
  return { account, addressId, rule: res.body.data as { id: number } }
}

const rowsOf = (ruleId: number) =>
  Database.use((db) => db.query<SmsDeliveryRow>("SELECT * FROM sms_deliveries WHERE rule_id = $1 ORDER BY id", [ruleId]))

const underTestClock = <A, E>(effect: Effect.Effect<A, E, any>) =>
  api.run(Effect.gen(function*() {
    yield* TestClock.setTime(Date.now())
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer())))

/** One worker round over these rules' rows only (the others stay leased a while: fine here). */
const roundFor = (...ruleIds: Array<number>) =>
  Effect.gen(function*() {
    const spec = yield* smsWorkerSpec()
    return yield* runOnce({ ...spec, claim: (now, limit) => Effect.map(spec.claim(now, limit), (rows) => rows.filter((r) => ruleIds.includes(r.rule_id))) })
  })

describe("summary", () => {
  it("carries sender, subject and the start of the body in at most 160 characters", () => {
    const text = smsSummary({ fromAddr: "Asha <asha@example.co.tz>", subject: "Invoice 42", smsBody: "Hello,\n\nplease find   the invoice attached. ".repeat(20) })
    expect(text.startsWith("From Asha <asha@example.co.tz>: Invoice 42 | Hello, please find the invoice")).toBe(true)
    expect(Array.from(text).length).toBeLessThanOrEqual(SMS_MAX_CHARS)
    expect(text.endsWith("…")).toBe(true)
  })

  it("caps a huge sender or subject so the body still shows, never splits an emoji", () => {
    const text = smsSummary({ fromAddr: "x".repeat(500) + "@example.com", subject: "😀".repeat(300), smsBody: "body" })
    expect(Array.from(text).length).toBeLessThanOrEqual(SMS_MAX_CHARS)
    expect(text).toContain("| body")
    expect(text).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/)
    expect(smsSummary({ fromAddr: "", subject: "", smsBody: "" })).toBe("From unknown sender: (no subject)")
  })
})

describe("sending", () => {
  it("sends one SMS with the rule's own key and the summary, and records the provider id", async () => {
    const { account, addressId, rule } = await setup()
    const before = provider.requests.length
    const rows = await underTestClock(Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId, from: "juma@example.co.tz", subject: "Meeting", text: "See you at 10" })
      yield* roundFor(rule.id)
      yield* TestClock.adjust("1 hour")
      yield* roundFor(rule.id)
      return yield* rowsOf(rule.id)
    }))
    const sent = provider.requests.slice(before)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.authorization).toBe(`Bearer ${KEY}`)
    expect(sent[0]!.contentType).toMatch(/application\/json/)
    expect(sent[0]!.body).toEqual({ to: "+255754000111", message: "From juma@example.co.tz: Meeting | See you at 10", sender_id: "TZMAIL" })
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ status: "sent", attempt: 1, last_error: null, provider_message_id: `msg-${before + 1}` })
    expect(rows[0]!.sent_at).toBeInstanceOf(Date)
  })

  it("never queues the same message twice for a rule, nor again when webhooks are re-triggered", async () => {
    const { account, addressId, rule } = await setup()
    const message = await api.run(storeMessageEffect({ userId: account.userId, addressId }))
    // Ingest calling the subscriber again for the same message (a retried transaction) is a no-op.
    const again = await api.run(SmsDeliveries.use((s) => s.enqueue(message)))
    expect(again).toHaveLength(0)
    const trig = await api.call("POST", `/api/webhook/webhooks/trigger/${message.id}`, { token: account.apiKey })
    expect(trig.status).toBe(200)
    expect(await api.run(rowsOf(rule.id))).toHaveLength(1)
  })

  it("retries provider failures after 1 s and 3 s, then fails", async () => {
    const { account, addressId, rule } = await setup()
    provider.behave({ status: 503 })
    const before = provider.requests.length
    const trace = await underTestClock(Effect.gen(function*() {
      const t0 = Date.now()
      yield* TestClock.setTime(t0)
      yield* storeMessageEffect({ userId: account.userId, addressId })
      const taken: Array<number> = []
      const snapshots: Array<SmsDeliveryRow> = []
      for (const wait of [0, 999, 1, 2999, 1, 3_600_000]) {
        if (wait) yield* TestClock.adjust(`${wait} millis`)
        taken.push(yield* roundFor(rule.id))
        snapshots.push((yield* rowsOf(rule.id))[0]!)
      }
      return { t0, taken, snapshots }
    }))
    provider.behave()
    expect(trace.taken).toEqual([1, 0, 1, 0, 1, 0])
    expect(trace.snapshots[0]).toMatchObject({ status: "pending", attempt: 1 })
    expect(trace.snapshots[0]!.next_attempt_at!.getTime()).toBe(trace.t0 + 1000)
    expect(trace.snapshots[0]!.last_error).toContain("HTTP 503")
    expect(trace.snapshots[2]!.next_attempt_at!.getTime()).toBe(trace.t0 + 4000)
    expect(trace.snapshots[5]).toMatchObject({ status: "failed", attempt: 3, sent_at: null })
    expect(provider.requests.length - before).toBe(3)
  })

  it("does not retry a refusal of the key (401)", async () => {
    const { account, addressId, rule } = await setup()
    provider.behave({ status: 401, body: { error: `invalid key ${KEY}` } })
    const before = provider.requests.length
    const rows = await underTestClock(Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* roundFor(rule.id)
      yield* TestClock.adjust("1 hour")
      yield* roundFor(rule.id)
      return yield* rowsOf(rule.id)
    }))
    provider.behave()
    expect(provider.requests.length - before).toBe(1)
    expect(rows[0]).toMatchObject({ status: "failed", attempt: 1 })
    expect(rows[0]!.last_error).toContain("HTTP 401")
    // The provider's body (which echoed the key) is not kept.
    expect(rows[0]!.last_error).not.toContain(KEY)
  })

  it("drops queued sends of a revoked rule without calling the provider", async () => {
    const { account, addressId, rule } = await setup()
    const before = provider.requests.length
    const rows = await underTestClock(Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      return undefined
    }).pipe(Effect.andThen(Effect.promise(() => api.call("POST", `/api/sms/notifications/${rule.id}/revoke`, { token: account.apiKey }))), Effect.andThen(roundFor(rule.id)), Effect.andThen(rowsOf(rule.id))))
    expect(provider.requests.length).toBe(before)
    expect(rows[0]).toMatchObject({ status: "failed", last_error: "rule revoked" })
    // Later mail queues nothing for it.
    await api.run(storeMessageEffect({ userId: account.userId, addressId }))
    expect(await api.run(rowsOf(rule.id))).toHaveLength(1)
  })

  it("sends one SMS per rule when an address has several", async () => {
    const { account, addressId, rule } = await setup("0611000222")
    const second = (await api.call("POST", "/api/sms/notifications", {
      token: account.apiKey,
      body: { address_id: addressId, phone_number: "+255622000333", provider_key: "another-key-123" },
    })).body.data
    const before = provider.requests.length
    await underTestClock(Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* roundFor(rule.id, second.id)
    }))
    const sent = provider.requests.slice(before)
    expect(sent.map((r) => [r.body.to, r.authorization]).sort()).toEqual([
      ["+255611000222", `Bearer ${KEY}`],
      ["+255622000333", "Bearer another-key-123"],
    ])
  })
})
