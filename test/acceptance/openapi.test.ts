/**
 * Acceptance: GET /api/openapi.json is a valid OpenAPI 3.1.0 document (SPEC.md "Versioning":
 * 3.1.0, info version 1.0.0), checked by @apidevtools/swagger-parser (schema validation and
 * $ref resolution) plus structural rules of our own: every operation has responses, operationIds
 * are unique, every local $ref resolves, and every endpoint SPEC.md lists for the implemented
 * capabilities is documented with its auth and success status.
 */
import SwaggerParser from "@apidevtools/swagger-parser"
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openApiDocument } from "../../src/http/openapi.ts"
import { ok, route } from "../../src/http/route.ts"
import { type AuthTestApp, startService } from "./support.ts"

let t: AuthTestApp
let doc: any
beforeAll(async () => {
  t = await startService()
  const res = await t.api.call("GET", "/api/openapi.json")
  expect(res.status).toBe(200)
  expect(res.headers.get("content-type")).toMatch(/^application\/json/)
  doc = res.body
})
afterAll(() => t.api.stop())

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

const operations = (d: any) =>
  Object.entries(d.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).filter(([m]) => METHODS.includes(m)).map(([method, op]) => ({ path, method, op }))
  )

/** Every `$ref` in the document, with the JSON pointer of where it sits. */
const refs = (node: unknown, at = "#", out: Array<{ at: string; ref: string }> = []) => {
  if (Array.isArray(node)) node.forEach((v, i) => refs(v, `${at}/${i}`, out))
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push({ at, ref: v })
      else refs(v, `${at}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`, out)
    }
  }
  return out
}

const resolvePointer = (root: unknown, pointer: string): unknown => {
  let node: any = root
  for (const raw of pointer.replace(/^#\/?/, "").split("/").filter((x) => x !== "")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~")
    if (node === null || typeof node !== "object" || !(key in node)) return undefined
    node = node[key]
  }
  return node
}

describe("GET /api/openapi.json", () => {
  it("declares OpenAPI 3.1.0 with info version 1.0.0", () => {
    expect(doc.openapi).toBe("3.1.0")
    expect(doc.info.version).toBe("1.0.0")
    expect(typeof doc.info.title).toBe("string")
  })

  it("validates with swagger-parser (OpenAPI 3.1 schema, $refs resolve)", async () => {
    const copy = structuredClone(doc)
    await expect(SwaggerParser.validate(copy)).resolves.toBeDefined()
  })

  it("every path has operations and every operation has responses, with unique operationIds", () => {
    const ops = operations(doc)
    expect(ops.length).toBeGreaterThan(0)
    for (const [path, item] of Object.entries(doc.paths as Record<string, object>)) {
      expect(path.startsWith("/"), path).toBe(true)
      expect(Object.keys(item).some((k) => METHODS.includes(k)), path).toBe(true)
    }
    const ids = new Set<string>()
    for (const { path, method, op } of ops) {
      expect(Object.keys(op.responses ?? {}).length, `${method} ${path}`).toBeGreaterThan(0)
      expect(typeof op.operationId, `${method} ${path}`).toBe("string")
      expect(ids.has(op.operationId), `duplicate operationId ${op.operationId}`).toBe(false)
      ids.add(op.operationId)
    }
  })

  it("every path template parameter is declared as a required path parameter", () => {
    for (const { path, method, op } of operations(doc)) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1])
      const declared = (op.parameters ?? []).filter((p: any) => p.in === "path")
      expect(declared.map((p: any) => p.name).sort(), `${method} ${path}`).toEqual([...names].sort())
      for (const p of declared) expect(p.required, `${method} ${path} ${p.name}`).toBe(true)
    }
  })

  it("every local $ref resolves against the document root (schemas embed no root-relative $defs pointers)", () => {
    const broken = refs(doc).filter(({ ref }) => ref.startsWith("#") && resolvePointer(doc, ref) === undefined)
    expect(broken.slice(0, 5)).toEqual([])
  })

  it("every security requirement names a declared scheme", () => {
    const schemes = Object.keys(doc.components?.securitySchemes ?? {})
    for (const { path, method, op } of operations(doc)) {
      for (const req of op.security ?? []) {
        for (const name of Object.keys(req)) expect(schemes, `${method} ${path}`).toContain(name)
      }
    }
  })

  it("documents every endpoint of SPEC.md at its path, with the right auth and success status", () => {
    const expected: Array<[string, string, "none" | "jwt" | "key", string]> = [
      ["post", "/api/auth/register", "none", "200"],
      ["post", "/api/auth/login", "none", "200"],
      ["post", "/api/auth/google", "none", "200"],
      ["post", "/api/auth/refresh", "none", "200"],
      ["get", "/api/auth/me", "jwt", "200"],
      ["patch", "/api/auth/me", "jwt", "200"],
      ["post", "/api/auth/email", "jwt", "200"],
      ["post", "/api/auth/email/verify", "none", "200"],
      ["post", "/api/auth/email/resend", "jwt", "200"],
      ["post", "/api/auth/phone", "jwt", "200"],
      ["post", "/api/auth/phone/verify", "jwt", "200"],
      ["post", "/api/auth/phone/resend", "jwt", "200"],
      ["post", "/api/apikeys", "jwt", "201"],
      ["get", "/api/apikeys", "jwt", "200"],
      ["delete", "/api/apikeys/{id}", "jwt", "200"],
      ["post", "/api/apikeys/{id}/revoke", "jwt", "200"],
      ["get", "/api/billing/balance", "key", "200"],
      ["post", "/api/billing/topup", "key", "201"],
      ["post", "/api/billing/topup/phone", "key", "201"],
      ["post", "/api/billing/payments/events", "none", "200"],
      ["post", "/api/inbound/addresses", "key", "201"],
      ["get", "/api/inbound/addresses", "key", "200"],
      ["delete", "/api/inbound/addresses/{id}", "key", "200"],
      ["get", "/api/inbound/messages", "key", "200"],
      ["get", "/api/inbound/messages/{id}", "key", "200"],
      ["patch", "/api/inbound/messages/{id}/read", "key", "200"],
      ["post", "/api/inbound/domains", "key", "201"],
      ["post", "/api/inbound/domains/{id}/verify", "key", "200"],
      ["get", "/api/inbound/domains", "key", "200"],
      ["delete", "/api/inbound/domains/{id}", "key", "200"],
      ["post", "/api/webhook/webhooks", "key", "201"],
      ["get", "/api/webhook/webhooks", "key", "200"],
      ["delete", "/api/webhook/webhooks/{id}", "key", "200"],
      ["get", "/api/webhook/webhooks/{id}/deliveries", "key", "200"],
      ["post", "/api/webhook/webhooks/{id}/test", "key", "200"],
      ["post", "/api/webhook/webhooks/trigger/{id}", "key", "200"],
      ["post", "/api/outbound/emails", "key", "201"],
      ["post", "/api/outbound/emails/batch", "key", "201"],
      ["get", "/api/outbound/emails", "key", "200"],
      ["get", "/api/outbound/emails/{id}", "key", "200"],
      ["post", "/api/outbound/templates", "key", "201"],
      ["get", "/api/outbound/templates", "key", "200"],
      ["get", "/api/outbound/templates/{id}", "key", "200"],
      ["patch", "/api/outbound/templates/{id}", "key", "200"],
      ["delete", "/api/outbound/templates/{id}", "key", "200"],
      ["post", "/api/domains", "key", "201"],
      ["get", "/api/domains", "key", "200"],
      ["post", "/api/domains/{id}/verify", "key", "200"],
      ["delete", "/api/domains/{id}", "key", "200"],
      ["post", "/api/domains/{id}/senders", "key", "201"],
      ["get", "/api/domains/senders", "key", "200"],
      ["delete", "/api/domains/senders/{id}", "key", "200"],
      ["post", "/api/sandbox/credentials", "key", "201"],
      ["get", "/api/sandbox/credentials", "key", "200"],
      ["post", "/api/sandbox/credentials/{id}/revoke", "key", "200"],
      ["get", "/api/sandbox/credentials/smtp", "key", "200"],
      ["post", "/api/sandbox/credentials/smtp/regenerate", "key", "200"],
      ["get", "/api/sandbox/messages", "key", "200"],
      ["get", "/api/sandbox/messages/{id}", "key", "200"],
      ["delete", "/api/sandbox/messages", "key", "200"],
      ["post", "/api/sms/notifications", "key", "201"],
      ["get", "/api/sms/notifications", "key", "200"],
      ["post", "/api/sms/notifications/{id}/revoke", "key", "200"],
      ["get", "/api/sms/notifications/{id}/deliveries", "key", "200"],
      ["get", "/api/compliance/profile", "key", "200"],
      ["patch", "/api/compliance/profile", "key", "200"],
      ["get", "/api/compliance/audit-export", "key", "200"],
      ["get", "/api/agent/configs", "key", "200"],
      ["get", "/api/agent/configs/{address_id}", "key", "200"],
      ["put", "/api/agent/configs/{address_id}", "key", "200"],
      ["post", "/api/agent/configs/{address_id}/draft", "key", "200"],
    ]
    const find = (path: string, method: string) => doc.paths[path]?.[method] ?? doc.paths[`${path}/`]?.[method]
    for (const [method, path, auth, status] of expected) {
      const op = find(path, method)
      expect(op, `${method} ${path}`).toBeDefined()
      expect(Object.keys(op.responses), `${method} ${path}`).toContain(status)
      const security = (op.security ?? doc.security ?? []) as Array<Record<string, unknown>>
      const names = security.flatMap((s) => Object.keys(s))
      if (auth === "none") expect(names, `${method} ${path}`).toEqual([])
      if (auth === "jwt") expect(names, `${method} ${path}`).toEqual(["bearerJwt"])
      if (auth === "key") expect(names.length, `${method} ${path}`).toBeGreaterThanOrEqual(2)
    }
  })

  it("documents the envelope on success and error answers", () => {
    const op = doc.paths["/api/billing/balance"].get
    const ok = op.responses["200"].content["application/json"].schema
    expect(ok.required).toEqual(expect.arrayContaining(["success", "timestamp"]))
    expect(Object.keys(ok.properties)).toEqual(expect.arrayContaining(["success", "data", "errors", "request_id", "timestamp"]))
    expect(op.responses["401"]).toBeDefined()
  })
})

describe("the generator", () => {
  it("keeps named (identified) schemas valid: their definitions live in components/schemas", async () => {
    const Money = Schema.Struct({ amount_tzs: Schema.Number }).annotate({ identifier: "Money" })
    const generated = openApiDocument([
      route({
        method: "post",
        path: "/t/money/:id",
        auth: "key",
        tag: "T",
        summary: "t",
        params: Schema.Struct({ id: Schema.String }),
        body: Schema.Struct({ price: Money, list: Schema.Array(Money) }),
        response: Money,
        handler: () => Effect.succeed(ok()),
      }),
    ], "http://localhost:8080")
    const broken = refs(generated).filter(({ ref }) => resolvePointer(generated, ref) === undefined)
    expect(broken).toEqual([])
    expect(JSON.stringify(generated)).toContain('"#/components/schemas/Money"')
    await expect(SwaggerParser.validate(structuredClone(generated) as never)).resolves.toBeDefined()
  })
})
