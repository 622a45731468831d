import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessage } from "../support/inbound-fixtures.ts"
import { answer, startReceiver, verifySignatures, type WebhookReceiver } from "../support/webhook-receiver.ts"

let api: TestApp
let strict: TestApp
let receiver: WebhookReceiver
let me: TestAccount
let other: TestAccount
let addressId: number
let othersAddressId: number

beforeAll(async () => {
  // Workers off: these tests look at the API; delivery has its own files.
  ;[api, strict, receiver] = await Promise.all([
    makeTestApp({ workers: false }),
    makeTestApp({ workers: false, settings: { webhookAllowPrivate: false } }),
    startReceiver(),
  ])
  me = await createAccount(api)
  other = await createAccount(api)
  addressId = await createAddress(api, me.userId)
  othersAddressId = await createAddress(api, other.userId)
})
afterAll(async () => {
  await Promise.all([api?.stop(), strict?.stop(), receiver?.close()])
})

const create = (body: unknown, token = me.apiKey, app = api) => app.call("POST", "/api/webhook/webhooks", { token, body })

describe("POST /api/webhook/webhooks", () => {
  it("creates an active webhook and shows a generated whsec_ secret once", async () => {
    const res = await create({ address_id: addressId, url: "https://hooks.example.com/in" })
    expect(res.status).toBe(201)
    expect(res.body.success).toBe(true)
    expect(res.body.data).toMatchObject({ address_id: addressId, url: "https://hooks.example.com/in", is_active: true })
    expect(res.body.data.secret).toMatch(/^whsec_[0-9a-f]{32}$/)
    expect(Object.keys(res.body.data).sort()).toEqual(["address_id", "created_at", "id", "is_active", "secret", "url"])

    const list = await api.call("GET", `/api/webhook/webhooks?address_id=${addressId}`, { token: me.apiKey })
    expect(list.status).toBe(200)
    const listed = list.body.data.find((w: { id: number }) => w.id === res.body.data.id)
    expect(listed).toMatchObject({ id: res.body.data.id, url: "https://hooks.example.com/in", is_active: true })
    expect(listed).not.toHaveProperty("secret")
  })

  it("keeps a given secret as given and stores it encrypted, not in clear", async () => {
    const secret = "my own secret, with spaces & ünïcode"
    const res = await create({ address_id: addressId, url: "http://hooks.example.com/x", secret })
    expect(res.status).toBe(201)
    expect(res.body.data.secret).toBe(secret)
    const [row] = await api.run(Database.use((db) =>
      db.query<{ secret_sealed: string }>("SELECT secret_sealed FROM webhooks WHERE id = $1", [res.body.data.id])
    ))
    expect(row!.secret_sealed.startsWith("v1.")).toBe(true)
    expect(row!.secret_sealed).not.toContain("my own secret")
  })

  it.each([
    ["ftp://example.com/hook", "http or https"],
    ["javascript:alert(1)", "http or https"],
    ["file:///etc/passwd", "http or https"],
    ["https://user:pass@example.com/hook", "credentials"],
    ["https://user@example.com/hook", "credentials"],
    ["not a url", ""],
    ["/relative/path", ""],
    [`https://example.com/${"a".repeat(10 * 1024)}`, "2048"],
  ])("refuses %s with 400 on field url", async (url, hint) => {
    const res = await create({ address_id: addressId, url })
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field: "url", code: "VALIDATION_ERROR" })
    expect(res.body.errors[0].message).toContain(hint)
  })

  it.each([
    ["too short", "short"],
    ["too long", "x".repeat(257)],
  ])("refuses a secret that is %s", async (_, secret) => {
    const res = await create({ address_id: addressId, url: "https://example.com/h", secret })
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe("secret")
  })

  it("refuses a missing address_id and a wrong type, one entry per field", async () => {
    const res = await create({ url: 5 })
    expect(res.status).toBe(400)
    expect(res.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(["address_id", "url"])
  })

  it.each([
    "http://127.0.0.1/hook",
    "http://10.0.0.5/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://100.64.1.1/hook",
    "http://[fd00::1]/hook",
  ])("refuses the literal private target %s unless WEBHOOK_ALLOW_PRIVATE", async (url) => {
    const acct = await createAccount(strict)
    const addr = await createAddress(strict, acct.userId)
    const res = await create({ address_id: addr, url }, acct.apiKey, strict)
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field: "url" })
    expect(res.body.errors[0].message).toMatch(/publicly routable/)
    // The same URL is fine where private targets are allowed (the embedded dev default).
    expect((await create({ address_id: addressId, url })).status).toBe(201)
  })

  it("answers 404 for an unknown address and 403 for another account's", async () => {
    const missing = await create({ address_id: 999_999, url: "https://example.com/h" })
    expect(missing.status).toBe(404)
    expect(missing.body.errors[0].code).toBe("NOT_FOUND")
    const foreign = await create({ address_id: othersAddressId, url: "https://example.com/h" })
    expect(foreign.status).toBe(403)
    expect(foreign.body.errors[0].code).toBe("FORBIDDEN")
    const list = await api.call("GET", `/api/webhook/webhooks?address_id=${othersAddressId}`, { token: me.apiKey })
    expect(list.status).toBe(403)
  })

  it("needs the webhooks scope and a credential", async () => {
    const narrow = await createAccount(api, { scopes: "inbound:read,sms" })
    const addr = await createAddress(api, narrow.userId)
    const res = await create({ address_id: addr, url: "https://example.com/h" }, narrow.apiKey)
    expect(res.status).toBe(403)
    const scoped = await createAccount(api, { scopes: "webhooks" })
    const addr2 = await createAddress(api, scoped.userId)
    expect((await create({ address_id: addr2, url: "https://example.com/h" }, scoped.apiKey)).status).toBe(201)
    expect((await api.call("POST", "/api/webhook/webhooks", { body: { address_id: addr2, url: "https://e.com" } })).status).toBe(401)
  })
})

describe("PATCH, DELETE, deliveries", () => {
  it("deactivates, re-points and deletes; checks the new url the same way", async () => {
    const created = (await create({ address_id: addressId, url: "https://a.example.com/h" })).body.data
    const off = await api.call("PATCH", `/api/webhook/webhooks/${created.id}`, { token: me.apiKey, body: { is_active: false } })
    expect(off.status).toBe(200)
    expect(off.body.data).toMatchObject({ id: created.id, is_active: false, url: "https://a.example.com/h" })
    expect(off.body.data).not.toHaveProperty("secret")
    const moved = await api.call("PATCH", `/api/webhook/webhooks/${created.id}`, { token: me.apiKey, body: { url: "https://b.example.com/h", is_active: true } })
    expect(moved.body.data).toMatchObject({ is_active: true, url: "https://b.example.com/h" })
    const bad = await api.call("PATCH", `/api/webhook/webhooks/${created.id}`, { token: me.apiKey, body: { url: "ftp://b.example.com/h" } })
    expect(bad.status).toBe(400)
    const badType = await api.call("PATCH", `/api/webhook/webhooks/${created.id}`, { token: me.apiKey, body: { is_active: "yes" } })
    expect(badType.status).toBe(400)
    expect(badType.body.errors[0].field).toBe("is_active")

    expect((await api.call("PATCH", `/api/webhook/webhooks/${created.id}`, { token: other.apiKey, body: { is_active: false } })).status).toBe(403)
    expect((await api.call("DELETE", `/api/webhook/webhooks/${created.id}`, { token: other.apiKey })).status).toBe(403)
    const del = await api.call("DELETE", `/api/webhook/webhooks/${created.id}`, { token: me.apiKey })
    expect(del.status).toBe(200)
    expect(del.body.data).toEqual({ deleted_webhook_id: created.id })
    expect((await api.call("DELETE", `/api/webhook/webhooks/${created.id}`, { token: me.apiKey })).status).toBe(404)
    expect((await api.call("PATCH", "/api/webhook/webhooks/abc", { token: me.apiKey, body: {} })).status).toBe(400)
  })

  it("lists deliveries with the WebhookDelivery fields; another account gets 403", async () => {
    const addr = await createAddress(api, me.userId)
    const hook = (await create({ address_id: addr, url: receiver.url })).body.data
    const message = await storeMessage(api, { userId: me.userId, addressId: addr })
    const res = await api.call("GET", `/api/webhook/webhooks/${hook.id}/deliveries`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toHaveLength(1)
    expect(res.body.data[0]).toMatchObject({
      webhook_id: hook.id,
      message_id: message.id,
      status: "pending",
      attempt: 0,
      status_code: null,
      delivered_at: null,
      next_retry_at: null,
      last_error: null,
    })
    for (const k of ["id", "webhook_id", "message_id", "status_code", "attempt", "delivered_at", "status", "next_retry_at", "last_error", "created_at"]) {
      expect(res.body.data[0]).toHaveProperty(k)
    }
    expect(res.body.pagination).toMatchObject({ page: 1, per_page: 20, total: 1 })
    expect((await api.call("GET", `/api/webhook/webhooks/${hook.id}/deliveries`, { token: other.apiKey })).status).toBe(403)
    expect((await api.call("GET", "/api/webhook/webhooks/999999/deliveries", { token: me.apiKey })).status).toBe(404)
  })
})

describe("POST /api/webhook/webhooks/{id}/test", () => {
  it("sends a signed webhook.test event and reports the answer", async () => {
    const hook = (await create({ address_id: addressId, url: receiver.url })).body.data
    const before = receiver.requests.length
    const res = await api.call("POST", `/api/webhook/webhooks/${hook.id}/test`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ webhook_id: hook.id, event: "webhook.test", delivered: true, status_code: 200, error: null })
    const got = receiver.requests[before]!
    const body = JSON.parse(got.body)
    expect(body).toMatchObject({ event: "webhook.test", webhook_id: hook.id, address_id: addressId })
    expect(typeof body.message).toBe("string")
    expect(body.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
    expect(verifySignatures(got, hook.secret)).toEqual({ xSignature: true, xWebhookSignature: true, standard: true })
    expect(got.headers["user-agent"]).toMatch(/^[A-Za-z]+-Webhook\/1\.0$/)
  })

  it("reports a receiver's failure without throwing", async () => {
    const failing = await startReceiver(answer(503, "maintenance"))
    const hook = (await create({ address_id: addressId, url: failing.url })).body.data
    const res = await api.call("POST", `/api/webhook/webhooks/${hook.id}/test`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ delivered: false, status_code: 503, error: "HTTP 503: maintenance" })
    await failing.close()
    expect((await api.call("POST", `/api/webhook/webhooks/${hook.id}/test`, { token: other.apiKey })).status).toBe(403)
  })
})

describe("POST /api/webhook/webhooks/trigger/{message_id}", () => {
  it("re-emits to every active webhook of the message's address, not to inactive ones", async () => {
    const addr = await createAddress(api, me.userId)
    const a = (await create({ address_id: addr, url: receiver.url })).body.data
    const b = (await create({ address_id: addr, url: receiver.url })).body.data
    const c = (await create({ address_id: addr, url: receiver.url })).body.data
    await api.call("PATCH", `/api/webhook/webhooks/${c.id}`, { token: me.apiKey, body: { is_active: false } })
    const message = await storeMessage(api, { userId: me.userId, addressId: addr })
    const res = await api.call("POST", `/api/webhook/webhooks/trigger/${message.id}`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data.map((d: { webhook_id: number }) => d.webhook_id).sort()).toEqual([a.id, b.id].sort())
    expect(res.body.data.every((d: { status: string; message_id: number }) => d.status === "pending" && d.message_id === message.id)).toBe(true)
    // Two deliveries per active webhook now (arrival + re-trigger), none for the inactive one.
    const count = async (id: number) => (await api.call("GET", `/api/webhook/webhooks/${id}/deliveries`, { token: me.apiKey })).body.data.length
    expect([await count(a.id), await count(b.id), await count(c.id)]).toEqual([2, 2, 0])
  })

  it("answers 403 for another account's message and 404 for an unknown one", async () => {
    const message = await storeMessage(api, { userId: other.userId, addressId: othersAddressId })
    const res = await api.call("POST", `/api/webhook/webhooks/trigger/${message.id}`, { token: me.apiKey })
    expect(res.status).toBe(403)
    expect(res.body.data).toBeUndefined()
    expect((await api.call("POST", "/api/webhook/webhooks/trigger/999999", { token: me.apiKey })).status).toBe(404)
  })
})
