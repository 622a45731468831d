/**
 * Acceptance: SPEC.md "Sandbox" with DECISIONS.md's credential list item, SMTP settings and
 * captured-message shapes. A real SMTP client (nodemailer, AUTH PLAIN) talks to SANDBOX_SMTP_PORT;
 * capture is free and works at a zero balance; revoke and regenerate take effect at once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectSmtp } from "../support/smtp-client.ts"
import { plain, transport } from "../sandbox/support.ts"
import { type AuthTestApp, balanceVia, expectError, expectOk, onboard, RFC3339_Z, startService } from "./support.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await startService()
})
afterAll(() => t.api.stop())

const call = (method: string, path: string, key: string, body?: unknown) => t.api.call(method, path, { token: key, ...(body === undefined ? {} : { body }) })
const port = () => t.api.ports.sandbox!

const authCode = async (user: string, pass: string) => {
  const smtp = await connectSmtp(port())
  await smtp.command("EHLO app.example.net")
  const r = await smtp.command(`AUTH PLAIN ${plain(user, pass)}`)
  smtp.destroy()
  return r.code
}

const LIST_FIELDS = ["client_id", "client_secret_prefix", "created_at", "id", "last_used_at", "revoked_at", "scopes", "status"]
const CAPTURED_FIELDS = ["attachments", "from_addr", "headers", "html_body", "id", "received_at", "recipients", "size", "subject", "text_body", "tls", "to_addr"]

describe("sandbox", () => {
  it("credentials: 201 with client_id/client_secret once, list masked, AUTH PLAIN, capture at zero balance, revoke at once", async () => {
    const acc = await onboard(t)
    const c = expectOk(await call("POST", "/api/sandbox/credentials", acc.key, {}), 201) as Record<string, any>
    expect(typeof c.client_id).toBe("string")
    expect(typeof c.client_secret).toBe("string")
    expect(c).toMatchObject({ scopes: "full", status: "active" })
    const list = expectOk(await call("GET", "/api/sandbox/credentials", acc.key)) as Array<Record<string, any>>
    expect(list).toHaveLength(1)
    expect(Object.keys(list[0]!).sort()).toEqual(LIST_FIELDS)
    expect(list[0]).toMatchObject({ id: c.id, client_id: c.client_id, status: "active", revoked_at: null })
    expect(JSON.stringify(list)).not.toContain(c.client_secret)

    expect(await authCode(c.client_id, "wrong-secret")).toBe(535)
    expect(await balanceVia(t, acc.key)).toBe(0)
    const info = await transport(port(), c.client_id, c.client_secret).sendMail({
      from: "App <app@shop.example>",
      to: ["one@customer.example", "two@customer.example"],
      cc: "three@customer.example",
      subject: "Order 7",
      text: "Asante",
      html: "<b>Asante</b>",
      attachments: [{ filename: "r.txt", content: "receipt", contentType: "text/plain" }],
    })
    expect(info.response).toMatch(/^250/)
    expect(await balanceVia(t, acc.key)).toBe(0)

    const res = await call("GET", "/api/sandbox/messages", acc.key)
    const msgs = expectOk(res) as Array<Record<string, any>>
    expect(res.body.pagination).toEqual({ page: 1, per_page: 20, total: 1, total_pages: 1 })
    expect(msgs).toHaveLength(1)
    const m = expectOk(await call("GET", `/api/sandbox/messages/${msgs[0]!.id}`, acc.key)) as Record<string, any>
    expect(Object.keys(m).sort()).toEqual(CAPTURED_FIELDS)
    expect(m.tls).toBeNull()
    expect(m.from_addr).toContain("app@shop.example")
    expect(m.to_addr).toBe("one@customer.example")
    expect(m.recipients).toEqual(["one@customer.example", "two@customer.example", "three@customer.example"])
    expect(m).toMatchObject({ subject: "Order 7" })
    expect(m.text_body).toContain("Asante")
    expect(m.html_body).toContain("<b>Asante</b>")
    expect(typeof m.headers).toBe("object")
    expect(m.size).toBeGreaterThan(0)
    expect(m.received_at).toMatch(RFC3339_Z)
    expect(m.attachments).toHaveLength(1)
    expect(m.attachments[0]).toMatchObject({ filename: "r.txt", size: 7 })
    expect(m.attachments[0].content_type).toMatch(/^text\/plain/)
    expect(Buffer.from(m.attachments[0].content, "base64").toString()).toBe("receipt")
    const used = (expectOk(await call("GET", "/api/sandbox/credentials", acc.key)) as Array<any>)[0]
    expect(used.last_used_at).toMatch(RFC3339_Z)

    const other = await onboard(t)
    expectError(await call("GET", `/api/sandbox/messages/${m.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", `/api/sandbox/credentials/${c.id}/revoke`, other.key), 403, "FORBIDDEN")
    expectError(await call("GET", "/api/sandbox/messages/99999999", acc.key), 404, "NOT_FOUND")
    expectError(await call("POST", "/api/sandbox/credentials/99999999/revoke", acc.key), 404, "NOT_FOUND")

    expectOk(await call("POST", `/api/sandbox/credentials/${c.id}/revoke`, acc.key))
    expect(await authCode(c.client_id, c.client_secret)).toBe(535)
    const revoked = (expectOk(await call("GET", "/api/sandbox/credentials", acc.key)) as Array<any>).find((x) => x.id === c.id)
    expect(revoked.status).toBe("revoked")
    expect(revoked.revoked_at).toMatch(RFC3339_Z)

    expectOk(await call("DELETE", "/api/sandbox/messages", acc.key))
    expect(expectOk(await call("GET", "/api/sandbox/messages", acc.key))).toEqual([])
  })

  it("SMTP settings {host, port, username} (+ password when new); regenerate invalidates the old password at once", async () => {
    const acc = await onboard(t)
    const first = expectOk(await call("GET", "/api/sandbox/credentials/smtp", acc.key)) as Record<string, any>
    expect(first).toMatchObject({ host: "localhost", port: port() })
    expect(typeof first.username).toBe("string")
    const again = expectOk(await call("GET", "/api/sandbox/credentials/smtp", acc.key)) as Record<string, any>
    expect(Object.keys(again).sort()).toEqual(["host", "port", "username"])
    const password: string | undefined = first.password
    if (password !== undefined) expect(await authCode(first.username, password)).toBe(235)

    const regen = expectOk(await call("POST", "/api/sandbox/credentials/smtp/regenerate", acc.key)) as Record<string, any>
    expect(Object.keys(regen).sort()).toEqual(["host", "password", "port", "username"])
    expect(regen.username).toBe(first.username)
    expect(await authCode(regen.username, regen.password)).toBe(235)
    const next = expectOk(await call("POST", "/api/sandbox/credentials/smtp/regenerate", acc.key)) as Record<string, any>
    expect(await authCode(regen.username, regen.password)).toBe(535)
    expect(await authCode(next.username, next.password)).toBe(235)

    const info = await transport(port(), next.username, next.password).sendMail({ from: "a@shop.example", to: "b@customer.example", subject: "s", text: "x" })
    expect(info.response).toMatch(/^250/)
    expect(expectOk(await call("GET", "/api/sandbox/messages", acc.key))).toHaveLength(1)

    const noScope = await onboard(t, { scopes: "inbound:read" })
    expectError(await call("GET", "/api/sandbox/credentials/smtp", noScope.key), 403, "FORBIDDEN")
    expectError(await call("POST", "/api/sandbox/credentials", acc.key, { scopes: "bogus" }), 400, "VALIDATION_ERROR", "scopes")
  })
})
