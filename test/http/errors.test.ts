/**
 * The error model end to end: every tagged error through the HTTP boundary (one table), body
 * decoding into `errors[]` with dotted paths, and what never leaks (stacks, SQL, provider text).
 */
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as E from "../../effects/errors.ts"
import { Database, DbError } from "../../effects/ports/Database.ts"
import { IdParams, PageQuery } from "../../effects/shared/schema.ts"
import { makeHttpApp } from "../../src/http/app.ts"
import { ERROR_TABLE } from "../../src/http/errors.ts"
import { ok, route } from "../../src/http/route.ts"
import { quietLoggerLayer } from "../../src/logger.ts"
import { makeRuntime } from "../../src/runtime.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { type TestApp, testSettings } from "../support/app.ts"
import { testDatabase } from "../support/db.ts"

const errors: Record<string, () => unknown> = {
  ValidationError: () => E.ValidationError.field("name", "name is required"),
  Suppressed: () => new E.Suppressed({ message: "all recipients are suppressed" }),
  Unauthorized: () => new E.Unauthorized({ message: "no" }),
  InsufficientBalance: () => new E.InsufficientBalance({ message: "top up", required_tzs: 5, balance_tzs: 0 }),
  AccountDisabled: () => new E.AccountDisabled({ message: "disabled" }),
  Forbidden: () => new E.Forbidden({ message: "not yours" }),
  NotFound: () => new E.NotFound({ message: "missing" }),
  Conflict: () => new E.Conflict({ message: "taken", field: "local_part" }),
  LimitReached: () => new E.LimitReached({ message: "100 addresses" }),
  PayloadTooLarge: () => new E.PayloadTooLarge({ message: "too big" }),
  RateLimited: () => new E.RateLimited({ message: "slow down", retry_after_seconds: 1.2 }),
  ProviderError: () => new E.ProviderError({ message: "provider failed", detail: "SECRET upstream text 535 auth" }),
  NotConfigured: () => new E.NotConfigured({ message: "AI gateway not configured" }),
  Pending: () => new E.Pending({ message: "DNS not propagated", data: { id: 7, status: "pending" } }),
  InternalError: () => new E.InternalError({ message: "boom", detail: "SELECT secret FROM x" }),
}

const Body = Schema.Struct({
  name: Schema.String.check(Schema.isMinLength(1)),
  count: Schema.optional(Schema.Int),
  attachments: Schema.optional(Schema.Array(Schema.Struct({ filename: Schema.String, data_base64: Schema.String }))),
})

const testRoutes = [
  route({
    method: "get",
    path: "/t/fail/:tag",
    auth: "none",
    tag: "T",
    summary: "fails with the named error",
    handler: (ctx) => Effect.fail(errors[(ctx.params as { tag: string }).tag]!()),
  }),
  route({ method: "get", path: "/t/defect", auth: "none", tag: "T", summary: "", handler: () => Effect.die(new Error("stack secret")) }),
  route({
    method: "get",
    path: "/t/db",
    auth: "none",
    tag: "T",
    summary: "",
    handler: () => Database.use((db) => db.query("SELECT * FROM no_such_table_secret")).pipe(Effect.map(() => ok())),
  }),
  route({
    method: "get",
    path: "/t/dberror",
    auth: "none",
    tag: "T",
    summary: "",
    handler: () => Effect.fail(new DbError({ message: "duplicate key users_email_key", code: "23505" })),
  }),
  route({ method: "post", path: "/t/body", auth: "none", tag: "T", summary: "", body: Body, status: 201, handler: (ctx) => Effect.succeed(ok(ctx.body)) }),
  route({
    method: "get",
    path: "/t/items/:id",
    auth: "none",
    tag: "T",
    summary: "",
    params: IdParams,
    query: PageQuery,
    handler: (ctx) => Effect.succeed(ok({ params: ctx.params, query: ctx.query })),
  }),
  route({ method: "get", path: "/t/jwt", auth: "jwt", tag: "T", summary: "", handler: (ctx) => Effect.succeed(ok({ user: ctx.principal.userId })) }),
  route({
    method: "get",
    path: "/t/key",
    auth: "key",
    scope: "inbound:read",
    tag: "T",
    summary: "",
    handler: (ctx) => Effect.succeed(ok({ user: ctx.principal.userId, via: ctx.principal.via })),
  }),
]

let api: TestApp
let app: ReturnType<typeof makeHttpApp>
let runtime: ReturnType<typeof makeRuntime>
let account: TestAccount
let readOnly: TestAccount
let noScope: TestAccount
let db: ReturnType<typeof testDatabase>

beforeAll(async () => {
  // The real runtime over a fresh database, with test routes mounted in-process.
  db = testDatabase()
  runtime = makeRuntime(testSettings(), { database: db.layer, logger: quietLoggerLayer, workers: false })
  app = makeHttpApp({ routes: testRoutes, runtime, maxBodyBytes: 1024 })
  api = { run: (effect: Effect.Effect<any, any, any>) => runtime.runPromise(effect) } as unknown as TestApp
  account = await createAccount(api)
  readOnly = await createAccount(api, { scopes: "inbound:read" })
  noScope = await createAccount(api, { scopes: "billing:read" })
})
afterAll(async () => {
  await runtime.dispose()
  await db.drop()
})

const req = async (path: string, init: RequestInit = {}) => {
  const res = await app.request(path, init)
  return { status: res.status, headers: res.headers, body: await res.json() as any }
}
const post = (body: string, contentType = "application/json") =>
  req("/t/body", { method: "POST", body, headers: { "content-type": contentType } })

describe("error table", () => {
  it.each(Object.keys(ERROR_TABLE))("renders %s with its status and code", async (tag) => {
    const r = await req(`/t/fail/${tag}`)
    const { status, code } = ERROR_TABLE[tag as keyof typeof ERROR_TABLE]
    expect(r.status).toBe(status)
    expect(r.body.success).toBe(false)
    expect(r.body.errors[0].code).toBe(code)
    expect(typeof r.body.request_id).toBe("string")
    expect(JSON.stringify(r.body)).not.toMatch(/SECRET|SELECT|stack/)
  })

  it("covers every documented code of SPEC.md", () => {
    const codes = Object.values(ERROR_TABLE).map((e) => e.code)
    for (
      const code of [
        "VALIDATION_ERROR",
        "SUPPRESSED",
        "UNAUTHORIZED",
        "INSUFFICIENT_BALANCE",
        "ACCOUNT_DISABLED",
        "FORBIDDEN",
        "NOT_FOUND",
        "CONFLICT",
        "LIMIT_REACHED",
        "RATE_LIMITED",
        "PROVIDER_ERROR",
        "NOT_CONFIGURED",
        "PENDING",
      ]
    ) expect(codes).toContain(code)
  })

  it("answers PENDING as HTTP 200 with success false and the resource", async () => {
    const r = await req("/t/fail/Pending")
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ success: false, data: { id: 7, status: "pending" }, errors: [{ code: "PENDING" }] })
  })

  it("sets Retry-After on RATE_LIMITED and keeps the field of a CONFLICT", async () => {
    expect((await req("/t/fail/RateLimited")).headers.get("retry-after")).toBe("2")
    expect((await req("/t/fail/Conflict")).body.errors[0]).toMatchObject({ field: "local_part", code: "CONFLICT" })
  })

  it("turns defects, database failures and unknown errors into a bare 500", async () => {
    for (const path of ["/t/defect", "/t/db", "/t/dberror"]) {
      const r = await req(path)
      expect(r.status).toBe(500)
      expect(r.body.errors).toEqual([{ code: "INTERNAL_ERROR", message: "internal error" }])
      expect(JSON.stringify(r.body)).not.toMatch(/secret|users_email_key|stack/i)
    }
  })
})

describe("request decoding", () => {
  it("accepts a valid body and answers the route's status", async () => {
    const r = await post(JSON.stringify({ name: "x", count: 2, unknown_extra: true }))
    expect(r.status).toBe(201)
    expect(r.body.data).toEqual({ name: "x", count: 2 })
  })

  it("reports every bad field with a dotted path", async () => {
    const r = await post(JSON.stringify({ name: "", count: "two", attachments: [{ filename: "a", data_base64: "x" }, {}, { filename: 3, data_base64: "y" }] }))
    expect(r.status).toBe(400)
    expect(r.body.errors.every((e: any) => e.code === "VALIDATION_ERROR")).toBe(true)
    const fields = r.body.errors.map((e: any) => e.field).sort()
    expect(fields).toEqual(["attachments.1.data_base64", "attachments.1.filename", "attachments.2.filename", "count", "name"])
  })

  it("reports a missing required field", async () => {
    const r = await post("{}")
    expect(r.body.errors).toEqual([{ field: "name", code: "VALIDATION_ERROR", message: "is required" }])
  })

  it("refuses malformed JSON, non-objects and wrong content types with 400", async () => {
    for (const [body, ct] of [["{not json", "application/json"], ["[1,2]", "application/json"], ["null", "application/json"], ["name=x", "application/x-www-form-urlencoded"]]) {
      const r = await post(body!, ct)
      expect(r.status).toBe(400)
      expect(r.body.errors[0].code).toBe("VALIDATION_ERROR")
    }
  })

  it("refuses an oversized body with 413 in the envelope", async () => {
    const r = await post(JSON.stringify({ name: "x".repeat(5000) }))
    expect(r.status).toBe(413)
    expect(r.body).toMatchObject({ success: false, errors: [{ code: "PAYLOAD_TOO_LARGE" }] })
  })

  it("validates path ids and paging", async () => {
    expect((await req("/t/items/12?page=2&per_page=100")).body.data).toEqual({ params: { id: 12 }, query: { page: 2, per_page: 100 } })
    for (const [path, field] of [["/t/items/abc", "id"], ["/t/items/0", "id"], ["/t/items/1?page=0", "page"], ["/t/items/1?per_page=101", "per_page"], ["/t/items/1?per_page=1.5", "per_page"], ["/t/items/1?page=x", "page"]]) {
      const r = await req(path!)
      expect(r.status).toBe(400)
      expect(r.body.errors[0].field).toBe(field)
    }
  })
})

describe("authentication at the boundary", () => {
  const get = (path: string, headers: Record<string, string>) => req(path, { headers })

  it("accepts the three API key forms and a JWT on key routes", async () => {
    for (const headers of [{ "x-api-key": readOnly.apiKey }, { authorization: `Bearer ${readOnly.apiKey}` }, { authorization: readOnly.apiKey }] as Array<Record<string, string>>) {
      const r = await get("/t/key", headers)
      expect(r.status).toBe(200)
      expect(r.body.data).toEqual({ user: readOnly.userId, via: "key" })
    }
    expect((await get("/t/key", { authorization: `Bearer ${account.token}` })).body.data.via).toBe("jwt")
  })

  it("answers 401 for missing, malformed and unknown credentials", async () => {
    for (
      const headers of [
        {},
        { authorization: "Basic abc" },
        { authorization: "Bearer" },
        { authorization: `Bearer MAIL_${"0".repeat(64)}` },
        { "x-api-key": "MAIL_short" },
        { authorization: "Bearer not.a.jwt" },
        { authorization: `Bearer ${account.token}x` },
        { authorization: `Bearer ${readOnly.apiKey}`, "x-api-key": account.apiKey },
      ]
    ) {
      const r = await get("/t/key", headers as Record<string, string>)
      expect(r.status).toBe(401)
      expect(r.body.errors[0].code).toBe("UNAUTHORIZED")
    }
  })

  it("refuses API keys on JWT-only routes with 401", async () => {
    expect((await get("/t/jwt", { authorization: `Bearer ${account.apiKey}` })).status).toBe(401)
    expect((await get("/t/jwt", { authorization: `Bearer ${account.token}` })).status).toBe(200)
  })

  it("answers 403 FORBIDDEN when the key lacks the scope", async () => {
    const r = await get("/t/key", { "x-api-key": noScope.apiKey })
    expect(r.status).toBe(403)
    expect(r.body.errors[0].code).toBe("FORBIDDEN")
  })

  it("answers 403 ACCOUNT_DISABLED for a disabled account's keys and tokens at once", async () => {
    const victim = await createAccount(api)
    expect((await get("/t/key", { "x-api-key": victim.apiKey })).status).toBe(200)
    await api.run(Database.use((db) => db.query("UPDATE users SET disabled_at = now() WHERE id = $1", [victim.userId])))
    for (const headers of [{ "x-api-key": victim.apiKey }, { authorization: `Bearer ${victim.token}` }] as Array<Record<string, string>>) {
      const r = await get("/t/key", headers)
      expect(r.status).toBe(403)
      expect(r.body.errors[0].code).toBe("ACCOUNT_DISABLED")
    }
  })
})
