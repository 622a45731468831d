/**
 * Account event endpoints over HTTP (DECISIONS.md "Bounces, complaints and outbound events"):
 * create (secret once), list, change, delete, deliveries; bad input field by field; ownership
 * (403 / 404), scope `webhooks`, the per-account cap, and private targets refused when
 * WEBHOOK_ALLOW_PRIVATE=false.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { MAX_EVENT_ENDPOINTS } from "../../effects/webhooks/endpoints.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
let strict: TestApp
let me: TestAccount
let other: TestAccount

beforeAll(async () => {
  ;[api, strict] = await Promise.all([
    makeTestApp({ workers: false }),
    makeTestApp({ workers: false, settings: { webhookAllowPrivate: false } }),
  ])
  me = await createAccount(api)
  other = await createAccount(api)
})
afterAll(async () => {
  await Promise.all([api?.stop(), strict?.stop()])
})

const ALL = ["email.sent", "email.failed", "email.bounced", "email.deferred", "email.complained", "inbound.message_received"]

const create = (body: unknown, token = me.apiKey, app = api) => app.call("POST", "/api/webhook/endpoints", { token, body })

const fieldsOf = (res: { body: { errors?: Array<{ field?: string; code: string }> } }) =>
  (res.body.errors ?? []).map((e) => [e.field, e.code])

describe("POST /api/webhook/endpoints", () => {
  it("creates an active endpoint for the account and shows a whsec_ secret once, stored sealed", async () => {
    const res = await create({ url: "https://hooks.example.co.tz/events", events: ["email.bounced", "email.complained"] })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ url: "https://hooks.example.co.tz/events", events: ["email.bounced", "email.complained"], is_active: true })
    expect(res.body.data.secret).toMatch(/^whsec_[0-9a-f]{32}$/)
    expect(Object.keys(res.body.data).sort()).toEqual(["created_at", "events", "id", "is_active", "secret", "updated_at", "url"])
    const list = await api.call("GET", "/api/webhook/endpoints", { token: me.apiKey })
    const listed = list.body.data.find((e: { id: number }) => e.id === res.body.data.id)
    expect(listed).toMatchObject({ id: res.body.data.id, events: ["email.bounced", "email.complained"] })
    expect(listed).not.toHaveProperty("secret")
    const [row] = await api.run(Database.use((db) =>
      db.query<{ secret_sealed: string }>("SELECT secret_sealed FROM event_endpoints WHERE id = $1", [res.body.data.id])
    ))
    expect(row!.secret_sealed.startsWith("v1.")).toBe(true)
    expect(row!.secret_sealed).not.toContain(res.body.data.secret)
  })

  it("keeps a secret given at creation as given", async () => {
    const res = await create({ url: "https://h.example.com/own", events: ["email.sent"], secret: "siri yangu ya webhook" })
    expect(res.status).toBe(201)
    expect(res.body.data.secret).toBe("siri yangu ya webhook")
  })

  it("accepts every documented event", async () => {
    const res = await create({ url: "http://hooks.example.co.tz/all", events: ALL })
    expect(res.status).toBe(201)
    expect(res.body.data.events).toEqual(ALL)
  })

  it.each([
    ["no url", { events: ["email.sent"] }, [["url", "VALIDATION_ERROR"]]],
    ["no events", { url: "https://h.example.com/" }, [["events", "VALIDATION_ERROR"]]],
    ["empty events", { url: "https://h.example.com/", events: [] }, [["events", "VALIDATION_ERROR"]]],
    ["an unknown event", { url: "https://h.example.com/", events: ["email.sent", "email.opened"] }, [["events.1", "VALIDATION_ERROR"]]],
    ["a repeated event", { url: "https://h.example.com/", events: ["email.sent", "email.sent"] }, [["events", "VALIDATION_ERROR"]]],
    ["events not an array", { url: "https://h.example.com/", events: "email.sent" }, [["events", "VALIDATION_ERROR"]]],
    ["an ftp url", { url: "ftp://h.example.com/", events: ["email.sent"] }, [["url", "VALIDATION_ERROR"]]],
    ["credentials in the url", { url: "https://u:p@h.example.com/", events: ["email.sent"] }, [["url", "VALIDATION_ERROR"]]],
    ["a relative url", { url: "/hook", events: ["email.sent"] }, [["url", "VALIDATION_ERROR"]]],
    ["a secret under 8 characters", { url: "https://h.example.com/", events: ["email.sent"], secret: "short" }, [["secret", "VALIDATION_ERROR"]]],
  ])("refuses %s with 400 on the field", async (_name, body, fields) => {
    const res = await create(body)
    expect(res.status).toBe(400)
    expect(res.body.success).toBe(false)
    expect(fieldsOf(res)).toEqual(fields)
  })

  it("refuses a private literal IP when WEBHOOK_ALLOW_PRIVATE=false", async () => {
    const account = await createAccount(strict)
    for (const url of ["http://127.0.0.1/hook", "http://10.0.0.5/hook", "http://[::1]/hook", "http://169.254.169.254/latest"]) {
      const res = await create({ url, events: ["email.sent"] }, account.apiKey, strict)
      expect(res.status, url).toBe(400)
      expect(fieldsOf(res), url).toEqual([["url", "VALIDATION_ERROR"]])
    }
    expect((await create({ url: "https://hooks.example.co.tz/x", events: ["email.sent"] }, account.apiKey, strict)).status).toBe(201)
  })

  it(`caps an account at ${MAX_EVENT_ENDPOINTS} endpoints: 409 LIMIT_REACHED`, async () => {
    const account = await createAccount(api)
    for (let i = 0; i < MAX_EVENT_ENDPOINTS; i++) {
      expect((await create({ url: `https://h.example.com/${i}`, events: ["email.sent"] }, account.apiKey)).status).toBe(201)
    }
    const res = await create({ url: "https://h.example.com/one-more", events: ["email.sent"] }, account.apiKey)
    expect(res.status).toBe(409)
    expect(res.body.errors[0].code).toBe("LIMIT_REACHED")
  })
})

describe("PATCH, DELETE and deliveries", () => {
  it("changes events, url and is_active; omitted fields stay", async () => {
    const id = (await create({ url: "https://h.example.com/a", events: ["email.sent"] })).body.data.id
    const events = await api.call("PATCH", `/api/webhook/endpoints/${id}`, { token: me.apiKey, body: { events: ["email.failed", "email.bounced"] } })
    expect(events.status).toBe(200)
    expect(events.body.data).toMatchObject({ id, url: "https://h.example.com/a", events: ["email.failed", "email.bounced"], is_active: true })
    expect(events.body.data).not.toHaveProperty("secret")
    const off = await api.call("PATCH", `/api/webhook/endpoints/${id}`, { token: me.apiKey, body: { is_active: false, url: "https://h.example.com/b" } })
    expect(off.body.data).toMatchObject({ url: "https://h.example.com/b", events: ["email.failed", "email.bounced"], is_active: false })
    const nothing = await api.call("PATCH", `/api/webhook/endpoints/${id}`, { token: me.apiKey, body: {} })
    expect(nothing.body.data).toMatchObject({ url: "https://h.example.com/b", is_active: false })
    const bad = await api.call("PATCH", `/api/webhook/endpoints/${id}`, { token: me.apiKey, body: { events: [], is_active: "yes" } })
    expect(bad.status).toBe(400)
    expect(fieldsOf(bad).map(([f]) => f).sort()).toEqual(["events", "is_active"])
  })

  it("deletes an endpoint; it is then 404", async () => {
    const id = (await create({ url: "https://h.example.com/del", events: ["email.sent"] })).body.data.id
    const res = await api.call("DELETE", `/api/webhook/endpoints/${id}`, { token: me.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual({ deleted_endpoint_id: id })
    expect((await api.call("DELETE", `/api/webhook/endpoints/${id}`, { token: me.apiKey })).status).toBe(404)
    expect((await api.call("GET", `/api/webhook/endpoints/${id}/deliveries`, { token: me.apiKey })).status).toBe(404)
  })

  it("lists deliveries newest first with pagination", async () => {
    const id = (await create({ url: "https://h.example.com/d", events: ["email.sent"] })).body.data.id
    await api.run(Database.use((db) =>
      db.query(
        `INSERT INTO event_deliveries (endpoint_id, event, body, email_id, status, attempt, next_attempt_at)
         SELECT $1, 'email.sent', '{}', g, 'pending', 0, now() FROM generate_series(1, 3) g`,
        [id],
      )
    ))
    const page = await api.call("GET", `/api/webhook/endpoints/${id}/deliveries?per_page=2`, { token: me.apiKey })
    expect(page.status).toBe(200)
    expect(page.body.pagination).toEqual({ page: 1, per_page: 2, total: 3, total_pages: 2 })
    expect(page.body.data.map((d: { email_id: number }) => d.email_id)).toEqual([3, 2])
    expect(Object.keys(page.body.data[0]).sort()).toEqual([
      "attempt", "created_at", "delivered_at", "email_id", "endpoint_id", "event", "id", "last_error", "message_id", "next_retry_at", "status", "status_code",
    ])
    expect((await api.call("GET", `/api/webhook/endpoints/${id}/deliveries?per_page=0`, { token: me.apiKey })).status).toBe(400)
  })
})

describe("security", () => {
  it("another account's endpoint is 403 and nothing of it is shown; an unknown one is 404", async () => {
    const created = await create({ url: "https://secret-receiver.example.com/x", events: ["email.sent"] })
    const id = created.body.data.id
    for (const [method, path, body] of [
      ["PATCH", `/api/webhook/endpoints/${id}`, { is_active: false }],
      ["DELETE", `/api/webhook/endpoints/${id}`, undefined],
      ["GET", `/api/webhook/endpoints/${id}/deliveries`, undefined],
    ] as const) {
      const res = await api.call(method, path, { token: other.apiKey, ...(body ? { body } : {}) })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(JSON.stringify(res.body)).not.toContain("secret-receiver")
    }
    const theirs = await api.call("GET", "/api/webhook/endpoints", { token: other.apiKey })
    expect(theirs.body.data.some((e: { id: number }) => e.id === id)).toBe(false)
    expect((await api.call("PATCH", "/api/webhook/endpoints/99999999", { token: me.apiKey, body: { is_active: false } })).status).toBe(404)
    expect((await api.call("GET", "/api/webhook/endpoints/abc/deliveries", { token: me.apiKey })).status).toBe(400)
  })

  it("needs scope webhooks; no credentials is 401", async () => {
    const narrow = await createAccount(api, { scopes: "inbound:read,outbound:send" })
    expect((await create({ url: "https://h.example.com/", events: ["email.sent"] }, narrow.apiKey)).status).toBe(403)
    expect((await api.call("GET", "/api/webhook/endpoints", { token: narrow.apiKey })).status).toBe(403)
    const scoped = await createAccount(api, { scopes: "webhooks" })
    expect((await create({ url: "https://h.example.com/", events: ["email.sent"] }, scoped.apiKey)).status).toBe(201)
    expect((await api.call("GET", "/api/webhook/endpoints")).status).toBe(401)
  })
})

describe("OpenAPI", () => {
  it("documents the endpoint routes with scope webhooks, and recipient feedback", async () => {
    const doc = (await api.call("GET", "/api/openapi.json")).body
    const ops = [
      ["/api/webhook/endpoints", "post", "201"],
      ["/api/webhook/endpoints", "get", "200"],
      ["/api/webhook/endpoints/{id}", "patch", "200"],
      ["/api/webhook/endpoints/{id}", "delete", "200"],
      ["/api/webhook/endpoints/{id}/deliveries", "get", "200"],
    ] as const
    for (const [path, method, status] of ops) {
      const op = doc.paths[path]?.[method]
      expect(op, `${method} ${path}`).toBeDefined()
      expect(op["x-required-scope"]).toBe("webhooks")
      expect(op.responses[status]).toBeDefined()
    }
    const body = JSON.stringify(doc.paths["/api/webhook/endpoints"].post.requestBody)
    for (const e of ALL) expect(body).toContain(e)
    expect(JSON.stringify(doc)).toContain("\"feedback\"")
  })
})
