/**
 * Deliveries to account event endpoints, driven one worker round at a time (`runOnce`) under
 * TestClock, with real HTTP receivers that verify signatures the way a customer would:
 * `email.sent` / `email.failed` from a send through a real local SMTP relay, the whole-message
 * provider failure, `inbound.message_received` for the account's endpoints, and the machinery
 * they share with inbox webhooks (retries 1 s / 3 s, 410 deactivation, SSRF refusal).
 */
import { Clock, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import type { EventDeliveryRow } from "../../effects/webhooks/endpoint-schema.ts"
import { EventDeliveries } from "../../effects/webhooks/event-deliveries.ts"
import { WebhookDeliveryOptions } from "../../effects/webhooks/transport.ts"
import { eventWorkerSpec } from "../../src/workers/webhooks.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessageEffect } from "../support/inbound-fixtures.ts"
import { answer, type Behaviour, startReceiver, verifySignatures, type WebhookReceiver } from "../support/webhook-receiver.ts"
import { fundedAccount, makeOutboundApp, send, startRelay, type TestRelay } from "../outbound/support.ts"

const shortTimeout = Layer.succeed(WebhookDeliveryOptions, { timeout: "600 millis" }) as Layer.Layer<any, never, never>

let relay: TestRelay
let api: TestApp
const receivers: Array<WebhookReceiver> = []
beforeAll(async () => {
  relay = await startRelay()
  api = await makeOutboundApp({ relayUrl: relay.url })
})
afterAll(async () => {
  await Promise.all([api?.stop(), relay?.close(), ...receivers.map((r) => r.close())])
})
beforeEach(() => relay.reset())

const receiver = async (...b: Array<Behaviour>) => {
  const r = await startReceiver(...b)
  receivers.push(r)
  return r
}

const endpoint = async (app: TestApp, account: TestAccount, url: string, events: Array<string>) => {
  const res = await app.call("POST", "/api/webhook/endpoints", { token: account.apiKey, body: { url, events } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data as { id: number; secret: string }
}

const rowsOf = (endpointId: number) =>
  Database.use((db) => db.query<EventDeliveryRow>("SELECT * FROM event_deliveries WHERE endpoint_id = $1 ORDER BY id", [endpointId]))

const underTestClock = <A, E>(app: TestApp, effect: Effect.Effect<A, E, any>) =>
  app.run(Effect.gen(function*() {
    yield* TestClock.setTime(Date.now())
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer())))

/** One round of the event worker, limited to `endpointId`'s rows (other tests' retries may be due). */
const roundFor = (endpointId: number) =>
  Effect.gen(function*() {
    const spec = yield* eventWorkerSpec()
    return yield* runOnce({ ...spec, claim: (now, limit) => Effect.map(spec.claim(now, limit), (rows) => rows.filter((r) => r.endpoint_id === endpointId)) })
  })

describe("outbound events", () => {
  it("email.sent and email.failed: one signed POST per recipient, with the documented payload", async () => {
    const r = await receiver(answer(204))
    const a = await fundedAccount(api, 100)
    const ep = await endpoint(api, a, r.url, ["email.sent", "email.failed"])
    const quiet = await endpoint(api, a, r.url, ["email.bounced"])
    relay.behaviour.refuse.set("gone@dest.example", 550)
    const res = await send(api, a, { to: ["ok@dest.example", "gone@dest.example"], subject: "s", text_body: "t" })
    expect(res.status).toBe(201)
    const rows = await underTestClock(api, Effect.gen(function*() {
      expect(yield* roundFor(ep.id)).toBe(2)
      return yield* rowsOf(ep.id)
    }))
    expect(await api.run(rowsOf(quiet.id))).toEqual([])
    expect(rows.map((x) => [x.event, x.status, x.attempt, x.status_code, x.email_id])).toEqual([
      ["email.sent", "delivered", 1, 204, res.body.data.id],
      ["email.failed", "delivered", 1, 204, res.body.data.id],
    ])
    expect(r.requests).toHaveLength(2)
    for (const q of r.requests) {
      expect(verifySignatures(q, ep.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
      expect(q.headers["content-type"]).toBe("application/json")
      expect(q.headers["user-agent"]).toMatch(/^\w+-Webhook\/1\.0$/)
    }
    const ids = r.requests.map((q) => q.headers["webhook-id"])
    expect(ids).toEqual(rows.map((x) => `evt_${x.id}`))
    const [sent, failed] = r.requests.map((q) => JSON.parse(q.body))
    expect(Object.keys(sent)).toEqual(["event", "email_id", "recipient", "status", "smtp_code", "diagnostic", "timestamp"])
    expect(sent).toMatchObject({ event: "email.sent", email_id: res.body.data.id, recipient: "ok@dest.example", status: "sent", smtp_code: "250" })
    expect(failed).toMatchObject({ event: "email.failed", email_id: res.body.data.id, recipient: "gone@dest.example", status: "failed", smtp_code: "5.1.1" })
    expect(failed.diagnostic).toContain("no such user")
  })

  it("a provider failure as a whole: email.failed for every recipient", async () => {
    const r = await receiver(answer(200))
    const a = await fundedAccount(api, 100)
    const ep = await endpoint(api, a, r.url, ["email.failed", "email.sent"])
    relay.behaviour.mailFromCode = 451
    const res = await send(api, a, { to: ["x@dest.example"], cc: ["y@dest.example"], subject: "s", text_body: "t" })
    expect(res.status).toBe(502)
    await underTestClock(api, roundFor(ep.id))
    const payloads = r.requests.map((q) => JSON.parse(q.body)).sort((x, y) => x.recipient.localeCompare(y.recipient))
    expect(payloads.map((p) => [p.event, p.recipient, p.status, p.smtp_code])).toEqual([
      ["email.failed", "x@dest.example", "failed", null],
      ["email.failed", "y@dest.example", "failed", null],
    ])
    expect(payloads[0].diagnostic).toBe("the mail provider did not accept the message")
  })

  it("retries after 1 s and 3 s with the same body, then fails; nothing for inactive endpoints", async () => {
    const r = await receiver(answer(500, "later"))
    const a = await fundedAccount(api, 100)
    const ep = await endpoint(api, a, r.url, ["email.sent"])
    const off = await endpoint(api, a, r.url, ["email.sent"])
    await api.call("PATCH", `/api/webhook/endpoints/${off.id}`, { token: a.apiKey, body: { is_active: false } })
    // Sent first: the request runs on the real clock, and the rows are due from then.
    expect((await send(api, a, { to: ["r@dest.example"], subject: "s", text_body: "t" })).status).toBe(201)
    const trace = await underTestClock(api, Effect.gen(function*() {
      const taken: Array<number> = []
      for (const wait of [0, 999, 1, 2999, 1, 3_600_000]) {
        if (wait) yield* TestClock.adjust(`${wait} millis`)
        taken.push(yield* roundFor(ep.id))
      }
      return { taken, rows: yield* rowsOf(ep.id) }
    }))
    expect(trace.taken).toEqual([1, 0, 1, 0, 1, 0])
    expect(trace.rows[0]).toMatchObject({ status: "failed", attempt: 3, status_code: 500, last_error: "HTTP 500: later" })
    expect(new Set(r.requests.map((q) => q.body)).size).toBe(1)
    expect(await api.run(rowsOf(off.id))).toEqual([])
  })

  it("a 410 Gone deactivates the endpoint", async () => {
    const r = await receiver(answer(410))
    const a = await fundedAccount(api, 100)
    const ep = await endpoint(api, a, r.url, ["email.sent"])
    await send(api, a, { to: ["r@dest.example"], subject: "s", text_body: "t" })
    await underTestClock(api, roundFor(ep.id))
    const [row] = await api.run(rowsOf(ep.id))
    expect(row).toMatchObject({ status: "failed", attempt: 1, status_code: 410 })
    const listed = await api.call("GET", "/api/webhook/endpoints", { token: a.apiKey })
    expect(listed.body.data.find((e: { id: number }) => e.id === ep.id)).toMatchObject({ is_active: false })
    // Later sends queue nothing for it.
    await send(api, a, { to: ["r2@dest.example"], subject: "s", text_body: "t" })
    expect(await api.run(rowsOf(ep.id))).toHaveLength(1)
  })
})

describe("inbound.message_received for the account's endpoints", () => {
  it("carries the inbox webhook's payload, webhook_id naming the endpoint; only subscribed endpoints of that account", async () => {
    const r = await receiver(answer(200))
    const me = await createAccount(api)
    const other = await createAccount(api)
    const addressId = await createAddress(api, me.userId)
    const ep = await endpoint(api, me, r.url, ["inbound.message_received"])
    const outboundOnly = await endpoint(api, me, r.url, ["email.sent"])
    const theirs = await endpoint(api, other, r.url, ["inbound.message_received"])
    const message = await underTestClock(api, Effect.gen(function*() {
      const m = yield* storeMessageEffect({ userId: me.userId, addressId })
      yield* roundFor(ep.id)
      return m
    }))
    expect(await api.run(rowsOf(outboundOnly.id))).toEqual([])
    expect(await api.run(rowsOf(theirs.id))).toEqual([])
    expect(r.requests).toHaveLength(1)
    const payload = JSON.parse(r.requests[0]!.body)
    expect(Object.keys(payload)).toEqual(["event", "webhook_id", "address_id", "message_id", "timestamp"])
    expect(payload).toMatchObject({ event: "inbound.message_received", webhook_id: ep.id, address_id: addressId, message_id: message.id })
    expect(verifySignatures(r.requests[0]!, ep.secret).xSignature).toBe(true)
    const [row] = await api.run(rowsOf(ep.id))
    expect(row).toMatchObject({ message_id: message.id, email_id: null, status: "delivered" })
  })

  it("handed to this instance's worker when one runs: queued taken and leased, posted with no claim; given back when it stops", async () => {
    const r = await receiver(answer(200))
    const me = await createAccount(api)
    const addressId = await createAddress(api, me.userId)
    const ep = await endpoint(api, me, r.url, ["inbound.message_received"])
    const out = await underTestClock(api, Effect.gen(function*() {
      const deliveries = yield* EventDeliveries
      const at = Number(yield* Clock.currentTimeMillis)
      const { posted, queued, claimed } = yield* Effect.scoped(Effect.gen(function*() {
        yield* deliveries.handed.open
        const message = yield* storeMessageEffect({ userId: me.userId, addressId })
        const queued = yield* rowsOf(ep.id)
        const claimed = yield* roundFor(ep.id)
        const attempts = yield* deliveries.handed.take(100)
        yield* Effect.all(attempts)
        return { posted: message, queued, claimed }
      }))
      // Queued taken while the worker ran, then it stopped before taking the row.
      yield* Effect.scoped(Effect.andThen(deliveries.handed.open, storeMessageEffect({ userId: me.userId, addressId })))
      return { at, posted, queued, claimed, rows: yield* rowsOf(ep.id) }
    }))
    expect(out.queued[0]).toMatchObject({ message_id: out.posted.id, status: "pending", attempt: 1 })
    expect(out.queued[0]!.locked_until!.getTime()).toBe(out.at + 30_000)
    expect(out.claimed).toBe(0)
    expect(r.requests).toHaveLength(1)
    expect(verifySignatures(r.requests[0]!, ep.secret).standard).toBe(true)
    expect(r.requests[0]!.headers["webhook-id"]).toBe(`evt_${out.rows[0]!.id}`)
    expect(JSON.parse(r.requests[0]!.body)).toMatchObject({ webhook_id: ep.id, address_id: addressId, message_id: out.posted.id })
    expect(out.rows.map((x) => [x.status, x.attempt, x.locked_until])).toEqual([["delivered", 1, null], ["pending", 0, null]])
  })

  it("writes nothing when the storing transaction rolls back", async () => {
    const me = await createAccount(api)
    const addressId = await createAddress(api, me.userId)
    const ep = await endpoint(api, me, "https://hooks.example.co.tz/in", ["inbound.message_received"])
    const failed = await api.run(Effect.flip(storeMessageEffect({ userId: me.userId, addressId }, { failAfterStored: true })))
    expect(failed).toBe("rolled back on purpose")
    expect(await api.run(rowsOf(ep.id))).toEqual([])
  })
})

describe("SSRF guard at delivery", () => {
  it("refuses a host that resolves to loopback: no request, failed with the reason", async () => {
    const strict = await makeTestApp({ workers: false, settings: { webhookAllowPrivate: false }, infrastructure: shortTimeout })
    try {
      const r = await receiver(answer(200))
      const me = await createAccount(strict)
      const addressId = await createAddress(strict, me.userId)
      const ep = await endpoint(strict, me, `http://localhost:${r.port}/hook`, ["inbound.message_received"])
      const rows = await underTestClock(strict, Effect.gen(function*() {
        yield* storeMessageEffect({ userId: me.userId, addressId })
        yield* roundFor(ep.id)
        return yield* rowsOf(ep.id)
      }))
      expect(r.requests).toHaveLength(0)
      expect(rows[0]).toMatchObject({ status: "failed", attempt: 1, status_code: null })
      expect(rows[0]!.last_error).toMatch(/refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
    } finally {
      await strict.stop()
    }
  })
})
