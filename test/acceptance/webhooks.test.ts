/**
 * Acceptance: SPEC.md "Webhooks", "Events / Webhook deliveries" and "SMS notifications", with
 * DECISIONS.md's headers (Standard Webhooks), secret shape, test event and SMS rule/delivery
 * fields. Mail arrives through a real SMTP client on the MX; a real HTTP receiver verifies the
 * signatures with node:crypto; the SMS provider is the msw fake speaking the documented contract.
 */
import { Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { sendRaw } from "../support/smtp-client.ts"
import { answer, startReceiver, verifySignatures, type WebhookReceiver } from "../support/webhook-receiver.ts"
import { type AuthTestApp, creditVia, expectError, expectOk, onboard, RFC3339_Z, startService } from "./support.ts"

let t: AuthTestApp
let dns: TestDnsServer
let rx: WebhookReceiver
beforeAll(async () => {
  dns = await startDnsServer(zoneFixture("platform.json"))
  rx = await startReceiver(answer(200, "ok"))
  t = await startService({ workers: true, settings: { dnsServers: [dns.address], smsApiUrl: Option.some("https://sms.provider.test/v1/messages") } })
})
afterAll(async () => {
  await t.api.stop()
  await dns.close()
  await rx.close()
})

const call = (method: string, path: string, key: string, body?: unknown) => t.api.call(method, path, { token: key, ...(body === undefined ? {} : { body }) })
let seq = 0
const lp = () => `hook-${process.pid}-${++seq}`

const WEBHOOK_FIELDS = ["address_id", "created_at", "id", "is_active", "url"]
const DELIVERY_FIELDS = ["attempt", "created_at", "delivered_at", "id", "last_error", "message_id", "next_retry_at", "status", "status_code", "webhook_id"]

const setup = async () => {
  const acc = await onboard(t)
  await creditVia(t, acc.user.id, 100)
  const addr = expectOk(await call("POST", "/api/inbound/addresses", acc.key, { local_part: lp() }), 201) as Record<string, any>
  return { acc, addr, email: `${addr.local_part}@inbox.localhost` }
}

const deliver = (to: string, subject = "Hello") =>
  sendRaw(t.api.ports.mx!, {
    from: "alice@sender.example",
    to: [to],
    raw: `From: alice@sender.example\r\nTo: ${to}\r\nSubject: ${subject}\r\nMessage-ID: <w${Math.random()}@sender.example>\r\n\r\nHabari\r\n`,
  })

/** Polls (bounded) until the receiver has a request matching `pred`. */
const waitForRequest = async (pred: (body: any) => boolean, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const hit = rx.requests.find((r) => pred(JSON.parse(r.body)))
    if (hit) return hit
    if (Date.now() > deadline) throw new Error(`no matching webhook request; got ${rx.requests.map((r) => r.body).join("\n")}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

const waitForDeliveries = async (key: string, webhookId: number, pred: (rows: Array<any>) => boolean) => {
  const deadline = Date.now() + 10_000
  for (;;) {
    const rows = expectOk(await call("GET", `/api/webhook/webhooks/${webhookId}/deliveries`, key)) as Array<any>
    if (pred(rows)) return rows
    if (Date.now() > deadline) throw new Error(`deliveries: ${JSON.stringify(rows)}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

describe("webhooks", () => {
  it("create (201, whsec_ secret shown once), list, signed delivery on mail arrival, deliveries, trigger, test, delete", async () => {
    const { acc, addr, email } = await setup()
    const url = `${rx.url}?acc=${acc.user.id}`
    const w = expectOk(await call("POST", "/api/webhook/webhooks", acc.key, { address_id: addr.id, url }), 201) as Record<string, any>
    for (const f of [...WEBHOOK_FIELDS, "secret"]) expect(w, f).toHaveProperty(f)
    expect(w).toMatchObject({ address_id: addr.id, url, is_active: true })
    expect(w.secret).toMatch(/^whsec_[0-9a-f]{32}$/)
    expect(w.created_at).toMatch(RFC3339_Z)

    const given = expectOk(await call("POST", "/api/webhook/webhooks", acc.key, { address_id: addr.id, url, secret: "my-own-secret-123" }), 201)
    expect(given.secret).toBe("my-own-secret-123")
    expectOk(await call("DELETE", `/api/webhook/webhooks/${given.id}`, acc.key))

    const list = expectOk(await call("GET", `/api/webhook/webhooks?address_id=${addr.id}`, acc.key)) as Array<Record<string, any>>
    expect(list.map((x) => x.id)).toEqual([w.id])
    expect(list[0]).not.toHaveProperty("secret")
    expect(JSON.stringify(list)).not.toContain(w.secret)

    const sent = await deliver(email, "hooked")
    expect(sent.data?.code).toBe(250)
    const [msg] = expectOk(await call("GET", `/api/inbound/messages?address_id=${addr.id}`, acc.key)) as Array<any>
    const req = await waitForRequest((b) => b.event === "inbound.message_received" && b.message_id === msg.id)
    expect(req.method).toBe("POST")
    expect(req.headers["content-type"]).toMatch(/^application\/json/)
    expect(req.headers["user-agent"]).toMatch(/-Webhook\/1\.0$/)
    expect(req.headers["x-signature"]).toMatch(/^[0-9a-f]{64}$/)
    expect(req.headers["x-webhook-signature"]).toBe(req.headers["x-signature"])
    expect(verifySignatures(req, w.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    expect(req.headers["webhook-timestamp"]).toMatch(/^\d+$/)
    expect(Math.abs(Number(req.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(60)
    expect(req.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)
    const body = JSON.parse(req.body)
    expect(Object.keys(body).sort()).toEqual(["address_id", "event", "message_id", "timestamp", "webhook_id"])
    expect(body).toMatchObject({ event: "inbound.message_received", webhook_id: w.id, address_id: addr.id, message_id: msg.id })
    expect(body.timestamp).toMatch(RFC3339_Z)

    const rows = await waitForDeliveries(acc.key, w.id, (r) => r.some((d) => d.status === "delivered"))
    const d = rows.find((x) => x.status === "delivered")
    for (const f of DELIVERY_FIELDS) expect(d, f).toHaveProperty(f)
    expect(d).toMatchObject({ webhook_id: w.id, message_id: msg.id, status_code: 200, attempt: 1, next_retry_at: null })
    expect(d.delivered_at).toMatch(RFC3339_Z)
    expect(String(d.id)).toBe(req.headers["webhook-id"])

    // trigger re-emits the stored message's event
    const before = rx.requests.filter((r) => JSON.parse(r.body).message_id === msg.id).length
    expectOk(await call("POST", `/api/webhook/webhooks/trigger/${msg.id}`, acc.key))
    const deadline = Date.now() + 10_000
    while (rx.requests.filter((r) => JSON.parse(r.body).message_id === msg.id).length <= before) {
      if (Date.now() > deadline) throw new Error("trigger did not re-send")
      await new Promise((r) => setTimeout(r, 25))
    }

    // test event
    expectOk(await call("POST", `/api/webhook/webhooks/${w.id}/test`, acc.key))
    const test = await waitForRequest((b) => b.event === "webhook.test" && b.webhook_id === w.id)
    const tb = JSON.parse(test.body)
    expect(tb).toMatchObject({ event: "webhook.test", webhook_id: w.id, address_id: addr.id })
    expect(typeof tb.message).toBe("string")
    expect(tb.timestamp).toMatch(RFC3339_Z)
    expect(verifySignatures(test, w.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })

    // PATCH is_active
    const off = expectOk(await call("PATCH", `/api/webhook/webhooks/${w.id}`, acc.key, { is_active: false })) as Record<string, any>
    expect(off.is_active).toBe(false)

    // ownership and missing
    const other = await onboard(t)
    expectError(await call("GET", `/api/webhook/webhooks/${w.id}/deliveries`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", `/api/webhook/webhooks/${w.id}/test`, other.key), 403, "FORBIDDEN")
    expectError(await call("DELETE", `/api/webhook/webhooks/${w.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", `/api/webhook/webhooks/trigger/${msg.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("GET", `/api/webhook/webhooks?address_id=${addr.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", "/api/webhook/webhooks", other.key, { address_id: addr.id, url: rx.url }), 403, "FORBIDDEN")
    expectError(await call("DELETE", "/api/webhook/webhooks/99999999", acc.key), 404, "NOT_FOUND")
    expectError(await call("POST", "/api/webhook/webhooks/trigger/99999999", acc.key), 404, "NOT_FOUND")

    expectOk(await call("DELETE", `/api/webhook/webhooks/${w.id}`, acc.key))
    expect(expectOk(await call("GET", `/api/webhook/webhooks?address_id=${addr.id}`, acc.key))).toEqual([])
  })

  it("400 VALIDATION_ERROR for a non-http(s) URL, missing address_id, short secret; 403 without the webhooks scope", async () => {
    const { acc, addr } = await setup()
    expectError(await call("POST", "/api/webhook/webhooks", acc.key, { address_id: addr.id, url: "ftp://example.com/x" }), 400, "VALIDATION_ERROR", "url")
    expectError(await call("POST", "/api/webhook/webhooks", acc.key, { url: rx.url }), 400, "VALIDATION_ERROR", "address_id")
    expectError(await call("POST", "/api/webhook/webhooks", acc.key, { address_id: addr.id, url: rx.url, secret: "short" }), 400, "VALIDATION_ERROR", "secret")
    expectError(await call("GET", "/api/webhook/webhooks", acc.key), 400, "VALIDATION_ERROR", "address_id")
    const ro = await onboard(t, { scopes: "inbound:read" })
    expectError(await call("GET", `/api/webhook/webhooks?address_id=${addr.id}`, ro.key), 403, "FORBIDDEN")
  })
})

describe("webhook retries, 410 Gone, inactive webhooks", () => {
  it("non-2xx → retrying with next_retry_at; 410 Gone deactivates; an inactive webhook gets no delivery", async () => {
    const { acc, addr, email } = await setup()
    const own = await startReceiver(answer(500, "boom"), answer(410, "gone"))
    try {
      const w = expectOk(await call("POST", "/api/webhook/webhooks", acc.key, { address_id: addr.id, url: own.url }), 201) as Record<string, any>
      expect((await deliver(email, "retry me")).data?.code).toBe(250)
      await own.waitFor(1)
      const retrying = await waitForDeliveries(acc.key, w.id, (r) => r.some((d) => d.status === "retrying"))
      expect(retrying[0]).toMatchObject({ status: "retrying", status_code: 500, attempt: 1 })
      expect(retrying[0].next_retry_at).toMatch(RFC3339_Z)
      expect(typeof retrying[0].last_error).toBe("string")
      await own.waitFor(2)
      expect(own.requests[1]!.headers["webhook-id"]).toBe(own.requests[0]!.headers["webhook-id"])
      const after = await waitForDeliveries(acc.key, w.id, (r) => r.some((d) => d.status_code === 410))
      expect(after[0].status).not.toBe("retrying")
      const [hook] = expectOk(await call("GET", `/api/webhook/webhooks?address_id=${addr.id}`, acc.key)) as Array<any>
      expect(hook.is_active).toBe(false)

      // inactive: trigger queues nothing for it
      const [msg] = expectOk(await call("GET", `/api/inbound/messages?address_id=${addr.id}`, acc.key)) as Array<any>
      expectOk(await call("POST", `/api/webhook/webhooks/trigger/${msg.id}`, acc.key))
      const rows = expectOk(await call("GET", `/api/webhook/webhooks/${w.id}/deliveries`, acc.key)) as Array<any>
      expect(rows).toHaveLength(1)
    } finally {
      await own.close()
    }
  })
})

describe("SMS notifications", () => {
  const RULE_FIELDS = ["address_id", "created_at", "id", "is_active", "phone_number", "provider_key_prefix", "revoked_at"]
  const SMS_DELIVERY_FIELDS = ["attempt", "created_at", "id", "last_error", "message_id", "provider_message_id", "rule_id", "sent_at", "status"]

  it("rule 201 (key once), list with prefix only, one SMS per inbound message, deliveries, revoke", async () => {
    const { acc, addr, email } = await setup()
    const key = `sk_live_${process.pid}_abcdef0123456789`
    const rule = expectOk(await call("POST", "/api/sms/notifications", acc.key, { address_id: addr.id, phone_number: "0754123456", provider_key: key }), 201) as Record<string, any>
    for (const f of RULE_FIELDS) expect(rule, f).toHaveProperty(f)
    expect(rule).toMatchObject({ address_id: addr.id, phone_number: "+255754123456", is_active: true, revoked_at: null, provider_key: key })
    expect(key.startsWith(rule.provider_key_prefix)).toBe(true)
    expect(rule.provider_key_prefix.length).toBeLessThan(key.length)

    const list = expectOk(await call("GET", `/api/sms/notifications?address_id=${addr.id}`, acc.key)) as Array<Record<string, any>>
    expect(list.map((r) => r.id)).toEqual([rule.id])
    expect(list[0]).not.toHaveProperty("provider_key")
    expect(JSON.stringify(list)).not.toContain(key)

    // The phone's inbox (the SMS port; its HTTP wire contract is covered by test/sms).
    expect((await deliver(email, "Invoice 42")).data?.code).toBe(250)
    const smsDeadline = Date.now() + 10_000
    while (!t.outbox.sms.some((m) => m.options.apiKey === key)) {
      if (Date.now() > smsDeadline) throw new Error("no SMS sent with the rule's provider key")
      await new Promise((r) => setTimeout(r, 25))
    }
    const req = t.outbox.sms.find((m) => m.options.apiKey === key)!
    expect(req.to).toBe("+255754123456")
    expect(req.message).toContain("Invoice 42")
    expect(req.message).toContain("alice@sender.example")
    expect(Array.from(req.message).length).toBeLessThanOrEqual(160)

    const deadline = Date.now() + 10_000
    let rows: Array<any> = []
    for (;;) {
      rows = expectOk(await call("GET", `/api/sms/notifications/${rule.id}/deliveries`, acc.key)) as Array<any>
      if (rows.some((d) => d.status === "sent") || Date.now() > deadline) break
      await new Promise((r) => setTimeout(r, 25))
    }
    expect(rows).toHaveLength(1)
    for (const f of SMS_DELIVERY_FIELDS) expect(rows[0], f).toHaveProperty(f)
    expect(rows[0]).toMatchObject({ rule_id: rule.id, status: "sent", attempt: 1 })
    expect(rows[0].sent_at).toMatch(RFC3339_Z)

    const other = await onboard(t)
    expectError(await call("POST", `/api/sms/notifications/${rule.id}/revoke`, other.key), 403, "FORBIDDEN")
    expectError(await call("GET", `/api/sms/notifications/${rule.id}/deliveries`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", "/api/sms/notifications/99999999/revoke", acc.key), 404, "NOT_FOUND")
    const revoked = expectOk(await call("POST", `/api/sms/notifications/${rule.id}/revoke`, acc.key)) as Record<string, any>
    expect(revoked.is_active).toBe(false)
    expect(revoked.revoked_at).toMatch(RFC3339_Z)
  })

  it("400 for a bad phone number or a missing provider key; 403 for a foreign address", async () => {
    const { acc, addr } = await setup()
    expectError(await call("POST", "/api/sms/notifications", acc.key, { address_id: addr.id, phone_number: "+255812345678", provider_key: "k-12345678" }), 400, "VALIDATION_ERROR", "phone_number")
    expectError(await call("POST", "/api/sms/notifications", acc.key, { address_id: addr.id, phone_number: "0754123456" }), 400, "VALIDATION_ERROR", "provider_key")
    const other = await onboard(t)
    expectError(await call("POST", "/api/sms/notifications", other.key, { address_id: addr.id, phone_number: "0754123456", provider_key: "k-12345678" }), 403, "FORBIDDEN")
  })
})
