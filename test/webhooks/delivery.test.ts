/**
 * Webhook delivery, driven one worker round at a time (`runOnce`) under Effect's TestClock, with
 * real HTTP receivers on loopback that verify signatures the way a customer's endpoint would.
 */
import { Clock, Duration, Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { WebhookDeliveries } from "../../effects/webhooks/delivery.ts"
import type { WebhookDeliveryRow } from "../../effects/webhooks/schema.ts"
import { WebhookDeliveryOptions } from "../../effects/webhooks/transport.ts"
import { leaseFor } from "../../src/workers/deliveries.ts"
import { webhookWorkerSpec } from "../../src/workers/webhooks.ts"
import { claimDue, runOnce } from "../../src/workers/worker.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessage, storeMessageEffect } from "../support/inbound-fixtures.ts"
import { startDnsServer } from "../support/dns-server.ts"
import { answer, type Behaviour, startReceiver, verifySignatures, type WebhookReceiver } from "../support/webhook-receiver.ts"

const TIMEOUT_MS = 600
// A Reference provides no tag of its own (`never`), hence the widening for `infrastructure`.
const shortTimeout = Layer.succeed(WebhookDeliveryOptions, { timeout: `${TIMEOUT_MS} millis` }) as Layer.Layer<any, never, never>

let api: TestApp
const receivers: Array<WebhookReceiver> = []
beforeAll(async () => {
  api = await makeTestApp({ workers: false, infrastructure: shortTimeout })
})
afterAll(async () => {
  await Promise.all([api?.stop(), ...receivers.map((r) => r.close())])
})

const receiver = async (...b: Array<Behaviour>) => {
  const r = await startReceiver(...b)
  receivers.push(r)
  return r
}

/** An account, an address and one webhook on `url`. */
const setup = async (url: string, app: TestApp = api) => {
  const account = await createAccount(app)
  const addressId = await createAddress(app, account.userId)
  const res = await app.call("POST", "/api/webhook/webhooks", { token: account.apiKey, body: { address_id: addressId, url } })
  expect(res.status).toBe(201)
  return { account, addressId, hook: res.body.data as { id: number; secret: string } }
}

const rowsOf = (webhookId: number) =>
  Database.use((db) => db.query<WebhookDeliveryRow>("SELECT * FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id", [webhookId]))

/** Runs `effect` under a TestClock set to the real time (rows and retries then line up with it). */
const underTestClock = <A, E>(app: TestApp, effect: Effect.Effect<A, E, any>) =>
  app.run(Effect.gen(function*() {
    yield* TestClock.setTime(Date.now())
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer())))

const round = Effect.flatMap(webhookWorkerSpec(), runOnce)

describe("queuing (outbox)", () => {
  it("writes one delivery per active webhook in the storing transaction, none for inactive ones", async () => {
    const r = await receiver()
    const { account, addressId, hook } = await setup(r.url)
    const second = (await api.call("POST", "/api/webhook/webhooks", { token: account.apiKey, body: { address_id: addressId, url: r.url } })).body.data
    const off = (await api.call("POST", "/api/webhook/webhooks", { token: account.apiKey, body: { address_id: addressId, url: r.url } })).body.data
    await api.call("PATCH", `/api/webhook/webhooks/${off.id}`, { token: account.apiKey, body: { is_active: false } })
    const message = await storeMessage(api, { userId: account.userId, addressId })
    const counts = await api.run(Effect.all([rowsOf(hook.id), rowsOf(second.id), rowsOf(off.id)]))
    expect(counts.map((rows) => rows.length)).toEqual([1, 1, 0])
    expect(counts[0]![0]).toMatchObject({ message_id: message.id, event: "inbound.message_received", status: "pending", attempt: 0 })
  })

  it("writes nothing when the storing transaction rolls back", async () => {
    const r = await receiver()
    const { account, addressId, hook } = await setup(r.url)
    const failed = await api.run(Effect.flip(storeMessageEffect({ userId: account.userId, addressId }, { failAfterStored: true })))
    expect(failed).toBe("rolled back on purpose")
    expect(await api.run(rowsOf(hook.id))).toHaveLength(0)
    const [n] = await api.run(Database.use((db) => db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM inbound_messages WHERE address_id = $1", [addressId])))
    expect(n!.n).toBe(0)
  })
})

describe("an attempt", () => {
  it("POSTs the documented payload with both signatures and the Standard Webhooks headers", async () => {
    const r = await receiver(answer(204))
    const { account, addressId, hook } = await setup(r.url)
    const { message, rows, before } = await underTestClock(api, Effect.gen(function*() {
      const before = Date.now()
      const message = yield* storeMessageEffect({ userId: account.userId, addressId })
      expect(yield* round).toBeGreaterThanOrEqual(1)
      return { message, rows: yield* rowsOf(hook.id), before }
    }))
    expect(r.requests).toHaveLength(1)
    const got = r.requests[0]!
    expect(got.method).toBe("POST")
    expect(got.headers["content-type"]).toBe("application/json")
    expect(got.headers["user-agent"]).toMatch(/^\w+-Webhook\/1\.0$/)
    expect(got.headers["x-signature"]).toMatch(/^[0-9a-f]{64}$/)
    expect(got.headers["x-webhook-signature"]).toBe(got.headers["x-signature"])
    expect(verifySignatures(got, hook.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    expect(verifySignatures(got, "some other secret").xSignature).toBe(false)
    expect(got.headers["webhook-id"]).toBe(String(rows[0]!.id))
    const ts = Number(got.headers["webhook-timestamp"])
    expect(Math.abs(ts - Math.floor(before / 1000))).toBeLessThanOrEqual(2)
    expect(got.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)
    const payload = JSON.parse(got.body)
    expect(Object.keys(payload)).toEqual(["event", "webhook_id", "address_id", "message_id", "timestamp"])
    expect(payload).toMatchObject({ event: "inbound.message_received", webhook_id: hook.id, address_id: addressId, message_id: message.id })
    expect(payload.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(rows[0]).toMatchObject({ status: "delivered", attempt: 1, status_code: 204, last_error: null, next_attempt_at: null })
    expect(rows[0]!.delivered_at).toBeInstanceOf(Date)
  })

  it("retries after 1 s and 3 s, with the same body and webhook-id, then fails (TestClock)", async () => {
    const r = await receiver(answer(500, "boom"))
    const { account, addressId, hook } = await setup(r.url)
    const trace = await underTestClock(api, Effect.gen(function*() {
      const t0 = Date.now()
      yield* TestClock.setTime(t0)
      yield* storeMessageEffect({ userId: account.userId, addressId })
      const seen: Array<{ step: string; taken: number; row: WebhookDeliveryRow }> = []
      const step = (name: string, advance: number) =>
        Effect.gen(function*() {
          if (advance) yield* TestClock.adjust(`${advance} millis`)
          const taken = yield* round
          const [row] = yield* rowsOf(hook.id)
          seen.push({ step: name, taken, row: row! })
        })
      yield* step("t0", 0)
      yield* step("t0+999", 999)
      yield* step("t0+1000", 1)
      yield* step("t0+3999", 2999)
      yield* step("t0+4000", 1)
      yield* step("+1h", 3_600_000)
      return { t0, seen }
    }))
    const by = Object.fromEntries(trace.seen.map((s) => [s.step, s]))
    expect(trace.seen.map((s) => [s.step, s.taken])).toEqual([["t0", 1], ["t0+999", 0], ["t0+1000", 1], ["t0+3999", 0], ["t0+4000", 1], ["+1h", 0]])
    expect(by["t0"]!.row).toMatchObject({ status: "retrying", attempt: 1, status_code: 500, last_error: "HTTP 500: boom" })
    expect(by["t0"]!.row.next_attempt_at!.getTime()).toBe(trace.t0 + 1000)
    expect(by["t0+1000"]!.row).toMatchObject({ status: "retrying", attempt: 2 })
    expect(by["t0+1000"]!.row.next_attempt_at!.getTime()).toBe(trace.t0 + 1000 + 3000)
    expect(by["t0+4000"]!.row).toMatchObject({ status: "failed", attempt: 3, status_code: 500, next_attempt_at: null, delivered_at: null })
    // Three requests, one delivery: same body and webhook-id, a fresh timestamp and signature each time.
    expect(r.requests).toHaveLength(3)
    expect(new Set(r.requests.map((q) => q.body)).size).toBe(1)
    expect(new Set(r.requests.map((q) => q.headers["webhook-id"])).size).toBe(1)
    expect(r.requests.map((q) => Number(q.headers["webhook-timestamp"]) - Math.floor(trace.t0 / 1000))).toEqual([0, 1, 4])
    for (const q of r.requests) expect(verifySignatures(q, hook.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    // The API shows the schedule while retrying and the final state after.
    const listed = await api.call("GET", `/api/webhook/webhooks/${hook.id}/deliveries`, { token: account.apiKey })
    expect(listed.body.data[0]).toMatchObject({ status: "failed", attempt: 3, status_code: 500, next_retry_at: null, last_error: "HTTP 500: boom" })
  })

  it("ends as delivered on the first 2xx after failures", async () => {
    const r = await receiver(answer(502), answer(429), answer(200))
    const { account, addressId, hook } = await setup(r.url)
    const rows = await underTestClock(api, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* round
      yield* TestClock.adjust("1 second")
      yield* round
      yield* TestClock.adjust("3 seconds")
      yield* round
      yield* TestClock.adjust("1 hour")
      yield* round
      return yield* rowsOf(hook.id)
    }))
    expect(r.requests).toHaveLength(3)
    expect(rows[0]).toMatchObject({ status: "delivered", attempt: 3, status_code: 200, last_error: null })
  })

  it("follows a longer WEBHOOK_MAX_ATTEMPTS schedule: 1 s, 3 s, 9 s", async () => {
    const app = await makeTestApp({ workers: false, settings: { webhookMaxAttempts: 4 } })
    const r = await receiver(answer(500))
    const { account, addressId, hook } = await setup(r.url, app)
    const rows = await underTestClock(app, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      const taken: Array<number> = []
      for (const wait of [0, 1000, 3000, 8999, 1, 3_600_000]) {
        if (wait) yield* TestClock.adjust(`${wait} millis`)
        taken.push(yield* round)
      }
      return { taken, rows: yield* rowsOf(hook.id) }
    }))
    await app.stop()
    expect(rows.taken).toEqual([1, 1, 1, 0, 1, 0])
    expect(rows.rows[0]).toMatchObject({ status: "failed", attempt: 4 })
  })

  it("deactivates the webhook on 410 Gone and stops", async () => {
    const r = await receiver(answer(410, "gone"))
    const { account, addressId, hook } = await setup(r.url)
    const rows = await underTestClock(api, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* round
      yield* TestClock.adjust("1 hour")
      yield* round
      // Later mail queues nothing for it.
      yield* storeMessageEffect({ userId: account.userId, addressId })
      return yield* rowsOf(hook.id)
    }))
    expect(r.requests).toHaveLength(1)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ status: "failed", attempt: 1, status_code: 410 })
    expect(rows[0]!.last_error).toContain("410")
    const list = await api.call("GET", `/api/webhook/webhooks?address_id=${addressId}`, { token: account.apiKey })
    expect(list.body.data[0]).toMatchObject({ id: hook.id, is_active: false })
  })

  it.each([301, 302, 307, 308])("treats a %i redirect as a failure and does not follow it", async (status) => {
    const elsewhere = await receiver(answer(200))
    const r = await receiver(answer(status, "", { location: elsewhere.url }))
    const { account, addressId, hook } = await setup(r.url)
    const rows = await underTestClock(api, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* round
      return yield* rowsOf(hook.id)
    }))
    expect(r.requests).toHaveLength(1)
    expect(elsewhere.requests).toHaveLength(0)
    expect(rows[0]).toMatchObject({ status: "retrying", attempt: 1, status_code: status })
    expect(rows[0]!.last_error).toContain("redirects are not followed")
  })

  it("retries a 4xx like any other non-2xx", async () => {
    const r = await receiver(answer(400, "bad request"))
    const { account, addressId, hook } = await setup(r.url)
    const rows = await underTestClock(api, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* round
      return yield* rowsOf(hook.id)
    }))
    expect(rows[0]).toMatchObject({ status: "retrying", status_code: 400, last_error: "HTTP 400: bad request" })
  })
})

describe("receivers that misbehave", () => {
  const attemptOnce = async (r: WebhookReceiver) => {
    const { account, addressId, hook } = await setup(r.url)
    const { rows, ms } = await underTestClock(api, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      // Only this webhook's row: retries of earlier tests may be due too and would add their time.
      const spec = yield* webhookWorkerSpec()
      const own = { ...spec, claim: (now: Date, limit: number) => Effect.map(spec.claim(now, limit), (rows) => rows.filter((x) => x.webhook_id === hook.id)) }
      const started = performance.now()
      yield* runOnce(own)
      const ms = performance.now() - started
      return { rows: yield* rowsOf(hook.id), ms }
    }))
    return { row: rows[0]!, ms }
  }

  it("gives up on a receiver that hangs after the per-attempt timeout", async () => {
    const { row, ms } = await attemptOnce(await receiver({ kind: "hang" }))
    expect(row).toMatchObject({ status: "retrying", attempt: 1, status_code: null })
    expect(row.last_error).toMatch(/timeout/)
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50)
    expect(ms).toBeLessThan(TIMEOUT_MS + 2000)
  })

  it("records a connection reset", async () => {
    const { row } = await attemptOnce(await receiver({ kind: "reset" }))
    expect(row).toMatchObject({ status: "retrying", status_code: null })
    expect(row.last_error).toMatch(/reset|closed/)
  })

  it("records a refused connection", async () => {
    const r = await receiver()
    await r.close()
    const { row } = await attemptOnce(r)
    expect(row).toMatchObject({ status: "retrying", status_code: null, last_error: "connection refused" })
  })

  it("reads only the start of a slow, huge error body", async () => {
    const { row, ms } = await attemptOnce(await receiver({ kind: "slow-huge", status: 500, bytes: 50 * 1024 * 1024, chunk: 64, everyMs: 100 }))
    expect(row).toMatchObject({ status: "retrying", status_code: 500 })
    expect(row.last_error!.length).toBeLessThanOrEqual(240)
    expect(row.last_error).toMatch(/^HTTP 500: x+$/)
    expect(ms).toBeLessThan(TIMEOUT_MS + 2000)
  })

  it("counts a 2xx at once, without waiting for a slow, huge body", async () => {
    const { row, ms } = await attemptOnce(await receiver({ kind: "slow-huge", status: 200, bytes: 50 * 1024 * 1024, chunk: 64, everyMs: 100 }))
    expect(row).toMatchObject({ status: "delivered", status_code: 200 })
    expect(ms).toBeLessThan(TIMEOUT_MS)
  })

  it("keeps a fast, huge error body out of last_error too", async () => {
    const { row } = await attemptOnce(await receiver(answer(503, "<html>" + "y".repeat(200_000))))
    expect(row.last_error!.length).toBeLessThanOrEqual(240)
  })
})

describe("SSRF guard at delivery", () => {
  it("refuses a host that resolves to loopback: no request, failed with the reason", async () => {
    const app = await makeTestApp({ workers: false, settings: { webhookAllowPrivate: false }, infrastructure: shortTimeout })
    const r = await receiver(answer(200))
    // A name, not a literal IP, passes creation; the check happens on what it resolves to.
    const { account, addressId, hook } = await setup(`http://localhost:${r.port}/hook`, app)
    const rows = await underTestClock(app, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* round
      yield* TestClock.adjust("1 hour")
      yield* round
      return yield* rowsOf(hook.id)
    }))
    const test = await app.call("POST", `/api/webhook/webhooks/${hook.id}/test`, { token: account.apiKey })
    await app.stop()
    expect(r.requests).toHaveLength(0)
    expect(rows[0]).toMatchObject({ status: "failed", attempt: 1, status_code: null })
    expect(rows[0]!.last_error).toMatch(/refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
    expect(test.body.data).toMatchObject({ delivered: false, status_code: null })
    expect(test.body.data.error).toMatch(/loopback/)
  })

  it("resolves webhook hosts through DNS_SERVERS when set, and vets what they answer", async () => {
    const dns = await startDnsServer({ "hooks.acme.test": { A: ["127.0.0.1"] } })
    const r = await receiver(answer(200))
    const deliverOnce = async (app: TestApp) => {
      const { account, addressId, hook } = await setup(`http://hooks.acme.test:${r.port}/hook`, app)
      const rows = await underTestClock(app, Effect.gen(function*() {
        yield* storeMessageEffect({ userId: account.userId, addressId })
        yield* round
        return yield* rowsOf(hook.id)
      }))
      await app.stop()
      return rows[0]!
    }
    const open = await deliverOnce(await makeTestApp({ workers: false, settings: { dnsServers: [dns.address] }, infrastructure: shortTimeout }))
    expect(open).toMatchObject({ status: "delivered", status_code: 200 })
    expect(r.requests).toHaveLength(1)
    expect(dns.queries()).toBeGreaterThan(0)
    const closed = await deliverOnce(
      await makeTestApp({ workers: false, settings: { dnsServers: [dns.address], webhookAllowPrivate: false }, infrastructure: shortTimeout }),
    )
    await dns.close()
    expect(closed).toMatchObject({ status: "failed", status_code: null })
    expect(closed.last_error).toMatch(/refused: hooks\.acme\.test resolves to 127\.0\.0\.1, a loopback address/)
    expect(r.requests).toHaveLength(1)
  })

  it("refuses a literal private URL stored before the setting changed", async () => {
    const app = await makeTestApp({ workers: false, settings: { webhookAllowPrivate: false }, infrastructure: shortTimeout })
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(`http://localhost:${r.port}/hook`, app)
    await app.run(Database.use((db) => db.query("UPDATE webhooks SET url = $2 WHERE id = $1", [hook.id, `http://[::ffff:127.0.0.1]:${r.port}/hook`])))
    const rows = await underTestClock(app, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* round
      return yield* rowsOf(hook.id)
    }))
    await app.stop()
    expect(r.requests).toHaveLength(0)
    expect(rows[0]!.last_error).toMatch(/loopback/)
  })
})

describe("leases and concurrency", () => {
  // A database of its own: no rows of other tests become due in between.
  let app: TestApp
  beforeAll(async () => {
    app = await makeTestApp({ workers: false, infrastructure: shortTimeout })
  })
  afterAll(() => app?.stop())

  it("two claimers never take the same row; a lease keeps a row until it expires", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const result = await underTestClock(app, Effect.gen(function*() {
      for (let i = 0; i < 30; i++) yield* storeMessageEffect({ userId: account.userId, addressId })
      const lease = leaseFor(`${TIMEOUT_MS} millis`)
      const claim = claimDue<WebhookDeliveryRow>({ table: "webhook_deliveries", dueColumn: "next_attempt_at", statuses: ["pending", "retrying"], lease })
      const now = new Date(Date.now())
      const [a, b] = yield* Effect.all([claim(now, 20), claim(now, 20)], { concurrency: 2 })
      const again = yield* claim(now, 100)
      const later = yield* claim(new Date(now.getTime() + 3600_000), 100)
      return { a: a.map((x) => x.id), b: b.map((x) => x.id), again: again.length, later: later.map((x) => x.id) }
    }))
    const mine = new Set((await app.run(rowsOf(hook.id))).map((x) => x.id))
    const claimed = [...result.a, ...result.b].filter((id) => mine.has(id))
    expect(new Set(claimed).size).toBe(claimed.length)
    expect(claimed.length).toBe(30)
    expect(result.again).toBe(0)
    expect(result.later.filter((id) => mine.has(id)).length).toBe(30)
  })

  it("two workers running at once deliver each attempt exactly once", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    await underTestClock(app, Effect.gen(function*() {
      for (let i = 0; i < 24; i++) yield* storeMessageEffect({ userId: account.userId, addressId })
      const spec = yield* webhookWorkerSpec()
      yield* Effect.all([runOnce(spec), runOnce(spec), runOnce(spec)], { concurrency: 3 })
      yield* Effect.all([runOnce(spec), runOnce(spec)], { concurrency: 2 })
    }))
    const ids = r.requests.map((q) => q.headers["webhook-id"])
    expect(ids).toHaveLength(24)
    expect(new Set(ids).size).toBe(24)
    const rows = await app.run(rowsOf(hook.id))
    expect(rows.every((x) => x.status === "delivered" && x.attempt === 1)).toBe(true)
  })

  it("an instance that lost its lease records nothing and sends nothing", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const out = await underTestClock(app, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      const claim = claimDue<WebhookDeliveryRow>({ table: "webhook_deliveries", dueColumn: "next_attempt_at", statuses: ["pending", "retrying"], lease: "2 seconds" })
      const mine = (yield* claim(new Date(Date.now()), 100)).filter((x) => x.webhook_id === hook.id)
      // Another instance took the row after our lease ran out.
      yield* claim(new Date(Date.now() + 10_000), 100)
      const deliveries = yield* WebhookDeliveries
      const next = yield* deliveries.attempt(mine[0]!)
      return { next, rows: yield* rowsOf(hook.id) }
    }))
    expect(Option.isNone(out.next)).toBe(true)
    expect(r.requests).toHaveLength(0)
    expect(out.rows[0]).toMatchObject({ status: "pending", attempt: 0 })
  })

  it("an attempt taken by an instance that died is spent: the next claimer makes the next one", async () => {
    const r = await receiver(answer(500))
    const { account, addressId, hook } = await setup(r.url, app)
    const rows = await underTestClock(app, Effect.gen(function*() {
      const db = yield* Database
      yield* storeMessageEffect({ userId: account.userId, addressId })
      // Instance A claimed the row and took attempt 1, then died before recording anything.
      yield* db.query(
        "UPDATE webhook_deliveries SET attempt = 1, locked_until = $2 WHERE webhook_id = $1",
        [hook.id, new Date(Number(yield* Clock.currentTimeMillis) + 1_800)],
      )
      expect(yield* round).toBe(0) // still leased
      yield* TestClock.adjust("2 seconds")
      yield* round // attempt 2
      yield* TestClock.adjust("3 seconds")
      yield* round // attempt 3, the last
      yield* TestClock.adjust("1 hour")
      yield* round
      return yield* rowsOf(hook.id)
    }))
    expect(r.requests).toHaveLength(2)
    expect(rows[0]).toMatchObject({ status: "failed", attempt: 3 })
  })

  it("a delivery whose last attempt died with its instance fails without another request", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const rows = await underTestClock(app, Effect.gen(function*() {
      const db = yield* Database
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* db.query("UPDATE webhook_deliveries SET attempt = 3, status = 'retrying', locked_until = $2 WHERE webhook_id = $1", [
        hook.id,
        new Date(Number(yield* Clock.currentTimeMillis) - 1),
      ])
      yield* round
      return yield* rowsOf(hook.id)
    }))
    expect(r.requests).toHaveLength(0)
    expect(rows[0]).toMatchObject({ status: "failed", attempt: 3 })
    expect(rows[0]!.last_error).toMatch(/interrupted/)
  })
})

describe("handed over by the commit (a worker runs here)", () => {
  // A database of its own: the handoff is this app's, and no other test's rows are due.
  let app: TestApp
  beforeAll(async () => {
    app = await makeTestApp({ workers: false, infrastructure: shortTimeout })
  })
  afterAll(() => app?.stop())

  const leaseMs = Duration.toMillis(leaseFor(`${TIMEOUT_MS} millis`))
  const claimNow = Effect.flatMap(Clock.currentTimeMillis, (now) =>
    claimDue<WebhookDeliveryRow>({ table: "webhook_deliveries", dueColumn: "next_attempt_at", statuses: ["pending", "retrying"], lease: "30 seconds" })(
      new Date(Number(now)),
      100,
    ))
  /** Runs every handed attempt there is now; answers when each one's next attempt is due. */
  const runHanded = Effect.gen(function*() {
    const deliveries = yield* WebhookDeliveries
    const attempts = yield* deliveries.handed.take(100)
    return yield* Effect.all(attempts, { concurrency: "unbounded" })
  })

  it("queues the deliveries taken and leased, and posts them with no claim and no take", async () => {
    const r = await receiver(answer(204))
    const { account, addressId, hook } = await setup(r.url, app)
    const out = await underTestClock(app, Effect.scoped(Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveries
      yield* deliveries.handed.open
      const at = Number(yield* Clock.currentTimeMillis)
      const message = yield* storeMessageEffect({ userId: account.userId, addressId })
      const queued = yield* rowsOf(hook.id)
      // Leased to this instance: another claimer does not get it.
      const claimed = (yield* claimNow).filter((x) => x.webhook_id === hook.id)
      const next = yield* runHanded
      return { at, message, queued, claimed, next, rows: yield* rowsOf(hook.id) }
    })))
    expect(out.queued).toHaveLength(1)
    expect(out.queued[0]).toMatchObject({ status: "pending", attempt: 1, message_id: out.message.id })
    expect(out.queued[0]!.locked_until!.getTime()).toBe(out.at + leaseMs)
    expect(out.claimed).toHaveLength(0)
    expect(out.next.every(Option.isNone)).toBe(true)
    expect(r.requests).toHaveLength(1)
    expect(verifySignatures(r.requests[0]!, hook.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    expect(r.requests[0]!.headers["webhook-id"]).toBe(String(out.rows[0]!.id))
    expect(JSON.parse(r.requests[0]!.body)).toMatchObject({ webhook_id: hook.id, address_id: addressId, message_id: out.message.id })
    expect(out.rows[0]).toMatchObject({ status: "delivered", attempt: 1, status_code: 204, locked_until: null })
  })

  it("a handed attempt that fails schedules the next one like a claimed attempt", async () => {
    const r = await receiver(answer(500), answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const out = await underTestClock(app, Effect.scoped(Effect.gen(function*() {
      yield* (yield* WebhookDeliveries).handed.open
      const at = Number(yield* Clock.currentTimeMillis)
      yield* storeMessageEffect({ userId: account.userId, addressId })
      const next = yield* runHanded
      const retrying = yield* rowsOf(hook.id)
      yield* TestClock.adjust("1 second")
      yield* round
      return { at, next, retrying, rows: yield* rowsOf(hook.id) }
    })))
    expect(out.next.map((n) => Option.map(n, (d) => d.getTime() - out.at))).toEqual([Option.some(1_000)])
    expect(out.retrying[0]).toMatchObject({ status: "retrying", attempt: 1, status_code: 500, locked_until: null })
    expect(r.requests).toHaveLength(2)
    expect(out.rows[0]).toMatchObject({ status: "delivered", attempt: 2 })
  })

  it("a handed row that waited past a third of its lease is given back unposted, for the next claim", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const out = await underTestClock(app, Effect.scoped(Effect.gen(function*() {
      yield* (yield* WebhookDeliveries).handed.open
      yield* storeMessageEffect({ userId: account.userId, addressId })
      yield* TestClock.adjust(Duration.millis(Math.ceil(leaseMs / 3)))
      yield* runHanded
      const givenBack = yield* rowsOf(hook.id)
      const requestsThen = r.requests.length
      yield* round
      return { givenBack, requestsThen, rows: yield* rowsOf(hook.id) }
    })))
    expect(out.requestsThen).toBe(0)
    expect(out.givenBack[0]).toMatchObject({ status: "pending", attempt: 0, locked_until: null })
    expect(r.requests).toHaveLength(1)
    expect(out.rows[0]).toMatchObject({ status: "delivered", attempt: 1 })
  })

  it("rows still waiting when the worker stops, or handed after it stopped, are given back at once", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const out = await underTestClock(app, Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveries
      // Queued taken while the worker ran, never started: the worker stops.
      yield* Effect.scoped(Effect.andThen(deliveries.handed.open, storeMessageEffect({ userId: account.userId, addressId })))
      const afterStop = yield* rowsOf(hook.id)
      // Queued taken while the worker ran, handed over after it stopped (the commit raced the shutdown).
      const taken = yield* Effect.scoped(Effect.gen(function*() {
        yield* deliveries.handed.open
        const db = yield* Database
        return yield* db.transaction(Effect.gen(function*() {
          const [m] = yield* db.query<{ id: number }>(
            `INSERT INTO inbound_messages (address_id, user_id, from_addr, to_addr, subject, text_body, headers, received_at, expires_at)
             SELECT address_id, user_id, from_addr, to_addr, subject, text_body, headers, received_at, expires_at FROM inbound_messages WHERE address_id = $1 LIMIT 1
             RETURNING id`,
            [addressId],
          )
          return yield* deliveries.queueStored([{ id: m!.id, addressId }])
        }))
      }))
      const beforeGive = (yield* rowsOf(hook.id))[1]
      yield* taken
      const afterGive = yield* rowsOf(hook.id)
      const requestsThen = r.requests.length
      yield* round
      return { afterStop, beforeGive, afterGive, requestsThen, rows: yield* rowsOf(hook.id) }
    }))
    expect(out.afterStop[0]).toMatchObject({ status: "pending", attempt: 0, locked_until: null })
    expect(out.beforeGive).toMatchObject({ status: "pending", attempt: 1 })
    expect(out.afterGive[1]).toMatchObject({ status: "pending", attempt: 0, locked_until: null })
    expect(out.requestsThen).toBe(0)
    expect(r.requests).toHaveLength(2)
    expect(out.rows.map((x) => [x.status, x.attempt])).toEqual([["delivered", 1], ["delivered", 1]])
  })

  it("without a worker here the deliveries are queued for claiming, untaken", async () => {
    const r = await receiver(answer(200))
    const { account, addressId, hook } = await setup(r.url, app)
    const rows = await underTestClock(app, Effect.gen(function*() {
      yield* storeMessageEffect({ userId: account.userId, addressId })
      return yield* rowsOf(hook.id)
    }))
    expect(rows[0]).toMatchObject({ status: "pending", attempt: 0, locked_until: null })
  })
})
