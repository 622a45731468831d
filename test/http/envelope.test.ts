import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(() => api.stop())

const expectEnvelope = (body: any) => {
  expect(typeof body.success).toBe("boolean")
  expect(body.request_id).toMatch(/^[A-Za-z0-9._:-]+$/)
  expect(body.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
}

describe("HTTP shell", () => {
  it("answers /healthz and /readyz in the envelope", async () => {
    const h = await api.call("GET", "/healthz")
    expect(h.status).toBe(200)
    expectEnvelope(h.body)
    expect(h.body).toMatchObject({ success: true, data: { status: "ok" } })
    const r = await api.call("GET", "/readyz")
    expect(r.status).toBe(200)
    expect(r.body.data.status).toBe("ready")
  })

  it("sets X-Request-Id and echoes a sane caller id", async () => {
    const a = await api.call("GET", "/healthz")
    expect(a.headers.get("x-request-id")).toBe(a.body.request_id)
    const b = await api.call("GET", "/healthz", { headers: { "x-request-id": "abc-123" } })
    expect(b.body.request_id).toBe("abc-123")
    const c = await api.call("GET", "/healthz", { headers: { "x-request-id": "bad id <script>" } })
    expect(c.body.request_id).not.toBe("bad id <script>")
  })

  it("answers unknown routes with 404 NOT_FOUND in the envelope", async () => {
    const r = await api.call("GET", "/api/nothing-here")
    expect(r.status).toBe(404)
    expectEnvelope(r.body)
    expect(r.body.success).toBe(false)
    expect(r.body.errors[0].code).toBe("NOT_FOUND")
  })

  it("answers a wrong method with 405 and Allow", async () => {
    const r = await api.call("DELETE", "/healthz")
    expect(r.status).toBe(405)
    expect(r.headers.get("allow")).toContain("GET")
    expect(r.body.errors[0].code).toBe("METHOD_NOT_ALLOWED")
  })

  it("serves a valid OpenAPI 3.1 document and a docs page", async () => {
    const r = await api.call("GET", "/api/openapi.json")
    expect(r.status).toBe(200)
    expect(r.body.openapi).toBe("3.1.0")
    expect(r.body.info.version).toBe("1.0.0")
    expect(r.body.paths["/healthz"].get.responses["200"]).toBeDefined()
    const d = await api.call("GET", "/docs")
    expect(d.status).toBe(200)
    expect(d.headers.get("content-type")).toContain("text/html")
    expect(String(d.body)).toContain("/healthz")
  })
})
