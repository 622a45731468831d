/** The account and key routes appear in the OpenAPI document with their auth and bodies. */
import { afterAll, beforeAll, expect, it } from "vitest"
import { type AuthTestApp, makeAuthTestApp } from "../support/auth.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await makeAuthTestApp()
})
afterAll(() => t.api.stop())

it("documents /api/auth/* and /api/apikeys", async () => {
  const doc = (await t.api.call("GET", "/api/openapi.json")).body
  for (const [path, method] of [
    ["/api/auth/register", "post"],
    ["/api/auth/login", "post"],
    ["/api/auth/google", "post"],
    ["/api/auth/refresh", "post"],
    ["/api/auth/me", "get"],
    ["/api/auth/me", "patch"],
    ["/api/auth/email", "post"],
    ["/api/auth/email/verify", "post"],
    ["/api/auth/email/resend", "post"],
    ["/api/auth/phone", "post"],
    ["/api/auth/phone/verify", "post"],
    ["/api/auth/phone/resend", "post"],
    ["/api/apikeys", "post"],
    ["/api/apikeys", "get"],
    ["/api/apikeys/{id}", "delete"],
    ["/api/apikeys/{id}/revoke", "post"],
  ] as const) {
    expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined()
  }
  expect(doc.paths["/api/auth/register"].post.security).toEqual([])
  expect(doc.paths["/api/apikeys"].post.security).toEqual([{ bearerJwt: [] }])
  expect(doc.paths["/api/apikeys"].post.responses["201"]).toBeDefined()
  expect(doc.paths["/api/auth/register"].post.requestBody.content["application/json"].schema.properties.password).toBeDefined()
  expect(doc.paths["/verify-email"]).toBeUndefined()
})
