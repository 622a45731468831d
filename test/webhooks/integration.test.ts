/**
 * Event delivery with the real worker loops and real time: the retry schedule measured once on
 * the wall clock, a restart between attempts (a new app on the same database), two instances
 * sharing a queue (PostgreSQL), and mail sent over SMTP ending as a signed webhook and an SMS.
 */
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import type { WebhookDeliveryRow } from "../../effects/webhooks/schema.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { onPostgres } from "../support/db.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { createAddress as createAddressHttp, fund } from "../support/inbound.ts"
import { createAddress, storeMessage } from "../support/inbound-fixtures.ts"
import { restartableDatabase } from "../support/restartable-db.ts"
import { makeSmsProvider } from "../support/sms-provider.ts"
import { answer, startReceiver, verifySignatures, type WebhookReceiver } from "../support/webhook-receiver.ts"

const receivers: Array<WebhookReceiver> = []
const apps: Array<TestApp> = []
afterAll(async () => {
  await Promise.all([...apps.map((a) => a.stop().catch(() => undefined)), ...receivers.map((r) => r.close())])
})

const receiver = async (...b: Parameters<typeof startReceiver>) => {
  const r = await startReceiver(...b)
  receivers.push(r)
  return r
}

const hookOn = async (app: TestApp, apiKey: string, addressId: number, url: string) => {
  const res = await app.call("POST", "/api/webhook/webhooks", { token: apiKey, body: { address_id: addressId, url } })
  expect(res.status).toBe(201)
  return res.body.data as { id: number; secret: string }
}

const deliveryRows = (app: TestApp, webhookId: number) =>
  app.run(Database.use((db) => db.query<WebhookDeliveryRow>("SELECT * FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id", [webhookId])))

const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe("the worker loop in real time", () => {
  it("retries after 1 s and then 3 s, then delivers", async () => {
    const app = await makeTestApp()
    apps.push(app)
    const r = await receiver(answer(500), answer(503), answer(200))
    const account = await createAccount(app)
    const addressId = await createAddress(app, account.userId)
    const hook = await hookOn(app, account.apiKey, addressId, r.url)
    const stored = Date.now()
    await storeMessage(app, { userId: account.userId, addressId })
    const got = await r.waitFor(3, 10_000)
    const first = got[0]!.at - stored
    const gap1 = got[1]!.at - got[0]!.at
    const gap2 = got[2]!.at - got[1]!.at
    console.info(`webhook retry timing (real clock): first attempt +${first} ms, then +${gap1} ms, then +${gap2} ms`)
    // Woken on commit and at each due time, not by the 2 s poll (slack for a loaded 2-core machine).
    expect(first).toBeLessThan(1000)
    expect(gap1).toBeGreaterThanOrEqual(1000)
    expect(gap1).toBeLessThan(1900)
    expect(gap2).toBeGreaterThanOrEqual(3000)
    expect(gap2).toBeLessThan(3900)
    await until("delivered", async () => (await deliveryRows(app, hook.id))[0]?.status === "delivered")
    const listed = await app.call("GET", `/api/webhook/webhooks/${hook.id}/deliveries`, { token: account.apiKey })
    expect(listed.body.data[0]).toMatchObject({ status: "delivered", attempt: 3, status_code: 200, last_error: null, next_retry_at: null })
  })
})

describe("a restart between attempts", () => {
  it("delivers exactly the remaining attempts from the new instance", async () => {
    const database = restartableDatabase()
    const r = await receiver(answer(500, "down"))
    const first = await makeTestApp({ database: database.next() })
    const account = await createAccount(first)
    const addressId = await createAddress(first, account.userId)
    const hook = await hookOn(first, account.apiKey, addressId, r.url)
    await storeMessage(first, { userId: account.userId, addressId })
    await r.waitFor(1)
    await until("attempt 1 recorded", async () => (await deliveryRows(first, hook.id))[0]?.status === "retrying")
    const stopping = Date.now()
    await first.stop()
    const stopMs = Date.now() - stopping
    expect(r.requests).toHaveLength(1) // stopped before attempt 2 was due

    // Same database, same SECRETS_KEY (the webhook secret is sealed under it).
    const second = await makeTestApp({ database: database.next(), settings: { secretsKey: first.settings.secretsKey } })
    const secondUp = Date.now()
    apps.push(second)
    const all = await r.waitFor(3, 15_000)
    await until("failed", async () => (await deliveryRows(second, hook.id))[0]?.status === "failed")
    await new Promise((res) => setTimeout(res, 1500))
    const rows = await deliveryRows(second, hook.id)
    await second.stop()
    await database.drop()
    console.info(
      `restart: first app stopped in ${stopMs} ms, the second up at +${secondUp - all[0]!.at} ms; attempts at +0, +${all[1]!.at - all[0]!.at}, +${all[2]!.at - all[0]!.at} ms`,
    )
    expect(r.requests).toHaveLength(3)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ status: "failed", attempt: 3, status_code: 500, last_error: "HTTP 500: down" })
    expect(new Set(r.requests.map((q) => q.headers["webhook-id"])).size).toBe(1)
    for (const q of r.requests) expect(verifySignatures(q, hook.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    // On schedule even across the restart: the new instance wakes for the retry the old one set,
    // when it is due or, if the restart took longer than the 1 s to it, as soon as it is up (a
    // loaded 2-core machine can take over a second to reopen PGlite); not at its 2 s poll.
    expect(all[1]!.at - all[0]!.at).toBeGreaterThanOrEqual(1000)
    expect(all[1]!.at - Math.max(all[0]!.at + 1000, secondUp)).toBeLessThan(900)
    expect(all[2]!.at - all[1]!.at).toBeGreaterThanOrEqual(3000)
    expect(all[2]!.at - all[1]!.at).toBeLessThan(3900)
  })
})

describe.skipIf(!onPostgres)("two instances on one PostgreSQL database", () => {
  it("share the queue and deliver every event exactly once", async () => {
    const database = restartableDatabase()
    const a = await makeTestApp({ database: database.next() })
    const b = await makeTestApp({ database: database.next(), settings: { secretsKey: a.settings.secretsKey } })
    const r = await receiver(answer(200))
    const account = await createAccount(a)
    const addressId = await createAddress(a, account.userId)
    await hookOn(a, account.apiKey, addressId, r.url)
    const N = 40
    // Half the mail arrives at each instance, so both workers are woken and compete for rows.
    await Promise.all(Array.from({ length: N }, (_, i) => storeMessage(i % 2 ? a : b, { userId: account.userId, addressId })))
    await r.waitFor(N, 20_000)
    await new Promise((res) => setTimeout(res, 2500))
    await Promise.all([a.stop(), b.stop()])
    await database.drop()
    const ids = r.requests.map((q) => q.headers["webhook-id"])
    expect(ids).toHaveLength(N)
    expect(new Set(ids).size).toBe(N)
  })
})

describe("end to end: mail over SMTP", () => {
  let dns: TestDnsServer
  let app: TestApp
  const sms = makeSmsProvider()
  beforeAll(async () => {
    dns = await startDnsServer(zoneFixture("platform.json"))
    app = await makeTestApp({ settings: { dnsServers: [dns.address], ...sms.settings }, infrastructure: sms.layer })
  })
  afterAll(async () => {
    await app?.stop()
    await dns?.close()
  })

  it("arrives as a correctly signed webhook and one SMS, both listed through the API", async () => {
    const r = await receiver(answer(200))
    const account = await createAccount(app)
    await fund(app, account.userId, 2_000)
    const address = await createAddressHttp(app, account.apiKey, "e2e-events")
    const hook = await hookOn(app, account.apiKey, address.id, r.url)
    const rule = await app.call("POST", "/api/sms/notifications", {
      token: account.apiKey,
      body: { address_id: address.id, phone_number: "0713000444", provider_key: "sk_e2e_abcdef123456" },
    })
    expect(rule.status).toBe(201)

    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: app.ports.mx!, secure: false, ignoreTLS: true })
    const sentAt = Date.now()
    await transport.sendMail({
      from: "Neema <neema@sender.example>",
      to: address.email,
      subject: "Order 7781 shipped",
      text: "Your order left the warehouse in Dar es Salaam this morning.",
    })
    transport.close()

    const [got] = await r.waitFor(1)
    const [text] = await sms.waitFor(1)
    console.info(`end to end: webhook +${got!.at - sentAt} ms after the SMTP send`)
    expect(verifySignatures(got!, hook.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    const payload = JSON.parse(got!.body)
    expect(payload).toMatchObject({ event: "inbound.message_received", webhook_id: hook.id, address_id: address.id })
    const messages = await app.call("GET", `/api/inbound/messages?address_id=${address.id}`, { token: account.apiKey })
    expect(messages.body.data).toHaveLength(1)
    expect(payload.message_id).toBe(messages.body.data[0].id)
    const full = await app.call("GET", `/api/inbound/messages/${payload.message_id}`, { token: account.apiKey })
    expect(full.body.data.subject).toBe("Order 7781 shipped")

    expect(text!.authorization).toBe("Bearer sk_e2e_abcdef123456")
    expect(text!.body.to).toBe("+255713000444")
    expect(text!.body.message).toMatch(/^From .*neema@sender\.example.*: Order 7781 shipped \| Your order left the warehouse/)
    expect(Array.from(text!.body.message).length).toBeLessThanOrEqual(160)

    await until("deliveries recorded", async () => {
      const w = await app.call("GET", `/api/webhook/webhooks/${hook.id}/deliveries`, { token: account.apiKey })
      const s = await app.call("GET", `/api/sms/notifications/${rule.body.data.id}/deliveries`, { token: account.apiKey })
      return w.body.data[0]?.status === "delivered" && s.body.data[0]?.status === "sent"
    })
    const w = await app.call("GET", `/api/webhook/webhooks/${hook.id}/deliveries`, { token: account.apiKey })
    expect(w.body.data).toHaveLength(1)
    expect(w.body.data[0]).toMatchObject({ message_id: payload.message_id, status: "delivered", attempt: 1, status_code: 200 })
    const s = await app.call("GET", `/api/sms/notifications/${rule.body.data.id}/deliveries`, { token: account.apiKey })
    expect(s.body.data).toHaveLength(1)
    expect(s.body.data[0]).toMatchObject({ message_id: payload.message_id, status: "sent", attempt: 1, provider_message_id: "msg-1" })

    // Re-triggering re-sends the webhook, never the SMS.
    const trig = await app.call("POST", `/api/webhook/webhooks/trigger/${payload.message_id}`, { token: account.apiKey })
    expect(trig.status).toBe(200)
    await r.waitFor(2)
    await new Promise((res) => setTimeout(res, 300))
    expect(sms.requests).toHaveLength(1)
  })
})
