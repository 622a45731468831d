/** Sandbox credentials and SMTP settings over HTTP, and their effect on SMTP AUTH. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp } from "../support/smtp-client.ts"
import { createCredential, plain, query, type SandboxTestApp, signedIn, smtpLogin, startSandboxApp, transport } from "./support.ts"

let app: SandboxTestApp
beforeAll(async () => {
  app = await startSandboxApp()
})
afterAll(() => app.stop())

const call = (method: string, path: string, token: string, body?: unknown) =>
  app.api.call(method, path, { token, ...(body !== undefined ? { body } : {}) })

/** Tries AUTH PLAIN on a fresh connection; answers the reply code. */
const authCode = async (user: string, pass: string) => {
  const smtp = await connectSmtp(app.port)
  await smtp.command("EHLO app.example.net")
  const r = await smtp.command(`AUTH PLAIN ${plain(user, pass)}`)
  smtp.destroy()
  return r
}

describe("POST /api/sandbox/credentials", () => {
  it("creates a full credential by default and shows the secret once; only its SHA-256 is stored", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const r = await call("POST", "/api/sandbox/credentials", apiKey, {})
    expect(r.status).toBe(201)
    const c = r.body.data
    expect(Object.keys(c).sort()).toEqual(["client_id", "client_secret", "client_secret_prefix", "created_at", "id", "scopes", "status"])
    expect(c.client_id).toMatch(/^sbx_[0-9a-f]{24}$/)
    expect(c.client_secret).toMatch(/^sbs_[0-9a-f]{64}$/)
    expect(c.client_secret_prefix).toBe(c.client_secret.slice(0, 12))
    expect(c).toMatchObject({ scopes: "full", status: "active" })
    const [row] = await query<Record<string, unknown>>(app.api, "SELECT * FROM sandbox_credentials WHERE id = $1", [c.id])
    expect(row!.user_id).toBe(userId)
    expect(row!.client_secret_hash).toBe(
      Buffer.from(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(c.client_secret))).toString("hex"),
    )
    expect(JSON.stringify(row)).not.toContain(c.client_secret)
    // A body-less POST works the same.
    const bare = await app.api.call("POST", "/api/sandbox/credentials", { token: apiKey })
    expect(bare.status).toBe(201)
    expect(bare.body.data.scopes).toBe("full")
  })

  it("restricts with a comma list of sandbox scopes, and refuses unknown or empty ones with 400", async () => {
    const { apiKey } = await createAccount(app.api)
    expect((await createCredential(app.api, apiKey, { scopes: " smtp , smtp:verify,smtp" })).scopes).toBe("smtp,smtp:verify")
    expect((await createCredential(app.api, apiKey, { scopes: "smtp:verify" })).scopes).toBe("smtp:verify")
    expect((await createCredential(app.api, apiKey, { scopes: "full" })).scopes).toBe("full")
    for (const scopes of ["smtp,admin", "inbound:read", " , ", ""]) {
      const r = await call("POST", "/api/sandbox/credentials", apiKey, { scopes })
      expect(r.status, scopes).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field: "scopes", code: "VALIDATION_ERROR" })
    }
    const wrongType = await call("POST", "/api/sandbox/credentials", apiKey, { scopes: 5 })
    expect(wrongType.status).toBe(400)
    expect(wrongType.body.errors[0].field).toBe("scopes")
  })

  it("caps active credentials at 100 per account (409 LIMIT_REACHED); revoking one makes room", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await query(
      app.api,
      `INSERT INTO sandbox_credentials (user_id, client_id, client_secret_hash, client_secret_prefix)
       SELECT $1::bigint, 'sbx_cap' || $1::text || '_' || i, 'x', 'sbs_x' FROM generate_series(1, 99) AS i`,
      [userId],
    )
    const last = await createCredential(app.api, apiKey)
    const over = await call("POST", "/api/sandbox/credentials", apiKey, {})
    expect([over.status, over.body.errors[0].code]).toEqual([409, "LIMIT_REACHED"])
    await call("POST", `/api/sandbox/credentials/${last.id}/revoke`, apiKey)
    expect((await call("POST", "/api/sandbox/credentials", apiKey, {})).status).toBe(201)
  })
})

describe("GET /api/sandbox/credentials and revoke", () => {
  it("lists masked credentials newest first; revoke is immediate, idempotent, and shows in the list", async () => {
    const { apiKey } = await createAccount(app.api)
    const a = await createCredential(app.api, apiKey)
    const b = await createCredential(app.api, apiKey, { scopes: "smtp" })
    expect((await authCode(a.client_id, a.client_secret)).code).toBe(235)

    const list = await call("GET", "/api/sandbox/credentials", apiKey)
    expect(list.status).toBe(200)
    expect(list.body.data.map((c: { id: number }) => c.id)).toEqual([b.id, a.id])
    const [itemB, itemA] = list.body.data
    expect(Object.keys(itemA).sort()).toEqual(
      ["client_id", "client_secret_prefix", "created_at", "id", "last_used_at", "revoked_at", "scopes", "status"],
    )
    expect(JSON.stringify(list.body)).not.toContain(a.client_secret)
    expect(itemA).toMatchObject({ client_id: a.client_id, client_secret_prefix: a.client_secret_prefix, status: "active", revoked_at: null })
    expect(Date.parse(itemA.last_used_at)).toBeGreaterThan(0)
    expect(itemB.last_used_at).toBeNull()

    const revoked = await call("POST", `/api/sandbox/credentials/${a.id}/revoke`, apiKey)
    expect(revoked.status).toBe(200)
    expect(revoked.body.data).toMatchObject({ id: a.id, status: "revoked" })
    expect(Date.parse(revoked.body.data.revoked_at)).toBeGreaterThan(0)
    const r = await authCode(a.client_id, a.client_secret)
    expect([r.code, r.text]).toEqual([535, "5.7.8 Authentication credentials invalid"])
    const again = await call("POST", `/api/sandbox/credentials/${a.id}/revoke`, apiKey)
    expect(again.body.data.revoked_at).toBe(revoked.body.data.revoked_at)
    const after = await call("GET", "/api/sandbox/credentials", apiKey)
    expect(after.body.data.map((c: { status: string }) => c.status)).toEqual(["active", "revoked"])
    // The other credential is untouched.
    expect((await authCode(b.client_id, b.client_secret)).code).toBe(235)
  })

  it("a revoked credential's open session can submit nothing more", async () => {
    const { apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey)
    const smtp = await signedIn(app.port, c.client_id, c.client_secret)
    expect((await smtp.command("MAIL FROM:<a@app.example>")).code).toBe(250)
    expect((await smtp.command("RSET")).code).toBe(250)
    await call("POST", `/api/sandbox/credentials/${c.id}/revoke`, apiKey)
    const mail = await smtp.command("MAIL FROM:<a@app.example>")
    expect(mail.code).toBe(530)
    expect(mail.text).toMatch(/^5\.7\.0 /)
    smtp.destroy()
  })

  it("another account's credential is 403, an unknown one 404, a bad id 400", async () => {
    const owner = await createAccount(app.api)
    const other = await createAccount(app.api)
    const c = await createCredential(app.api, owner.apiKey)
    const forbidden = await call("POST", `/api/sandbox/credentials/${c.id}/revoke`, other.apiKey)
    expect([forbidden.status, forbidden.body.errors[0].code]).toEqual([403, "FORBIDDEN"])
    expect((await authCode(c.client_id, c.client_secret)).code).toBe(235)
    const missing = await call("POST", "/api/sandbox/credentials/999999999/revoke", other.apiKey)
    expect([missing.status, missing.body.errors[0].code]).toEqual([404, "NOT_FOUND"])
    expect((await call("POST", "/api/sandbox/credentials/abc/revoke", other.apiKey)).status).toBe(400)
    const theirs = await call("GET", "/api/sandbox/credentials", other.apiKey)
    expect(theirs.body.data).toEqual([])
  })
})

describe("SMTP settings", () => {
  it("the first read creates the login and shows the password; later reads omit it; host and port are the listener's", async () => {
    const { apiKey } = await createAccount(app.api)
    const first = await smtpLogin(app.api, apiKey)
    expect(first).toMatchObject({ host: "localhost", port: app.port })
    expect(first.username).toMatch(/^sbu_[0-9a-f]{16}$/)
    expect(first.password).toMatch(/^[0-9a-f]{48}$/)
    const second = await smtpLogin(app.api, apiKey)
    expect(second).toEqual({ host: "localhost", port: app.port, username: first.username })
    await transport(app.port, first.username, first.password!).verify()
  })

  it("regenerate returns a new password once; the old one fails at once, also on sessions already signed in", async () => {
    const { apiKey } = await createAccount(app.api)
    const first = await smtpLogin(app.api, apiKey)
    const open = await signedIn(app.port, first.username, first.password!)
    const r = await call("POST", "/api/sandbox/credentials/smtp/regenerate", apiKey)
    expect(r.status).toBe(200)
    expect(r.body.data).toMatchObject({ host: "localhost", port: app.port, username: first.username })
    expect(r.body.data.password).toMatch(/^[0-9a-f]{48}$/)
    expect(r.body.data.password).not.toBe(first.password)
    expect((await authCode(first.username, first.password!)).code).toBe(535)
    expect((await authCode(first.username, r.body.data.password)).code).toBe(235)
    expect((await open.command("MAIL FROM:<a@app.example>")).code).toBe(530)
    open.destroy()
    expect((await smtpLogin(app.api, apiKey)).password).toBeUndefined()
  })

  it("regenerate before any read creates the login", async () => {
    const { apiKey } = await createAccount(app.api)
    const r = await call("POST", "/api/sandbox/credentials/smtp/regenerate", apiKey)
    expect(r.status).toBe(200)
    expect((await authCode(r.body.data.username, r.body.data.password)).code).toBe(235)
  })

  it("two first reads at once create one login; exactly one shows a password", async () => {
    const { apiKey } = await createAccount(app.api)
    const both = await Promise.all([smtpLogin(app.api, apiKey), smtpLogin(app.api, apiKey)])
    expect(both[0].username).toBe(both[1].username)
    expect(both.filter((s) => s.password !== undefined)).toHaveLength(1)
  })
})

describe("access to the sandbox endpoints", () => {
  it("needs credentials (401) and the sandbox scope (403); a sandbox-scoped key works", async () => {
    expect((await app.api.call("GET", "/api/sandbox/credentials")).status).toBe(401)
    const narrow = await createAccount(app.api, { scopes: "inbound:read" })
    for (
      const [method, path] of [
        ["POST", "/api/sandbox/credentials"],
        ["GET", "/api/sandbox/credentials"],
        ["GET", "/api/sandbox/credentials/smtp"],
        ["POST", "/api/sandbox/credentials/smtp/regenerate"],
        ["POST", "/api/sandbox/credentials/1/revoke"],
        ["GET", "/api/sandbox/messages"],
        ["GET", "/api/sandbox/messages/1"],
        ["DELETE", "/api/sandbox/messages"],
        ["GET", "/api/sandbox/usage"],
      ] as const
    ) {
      const r = await call(method, path, narrow.apiKey)
      expect([r.status, r.body.errors?.[0]?.code], `${method} ${path}`).toEqual([403, "FORBIDDEN"])
    }
    const scoped = await createAccount(app.api, { scopes: "sandbox" })
    expect((await call("POST", "/api/sandbox/credentials", scoped.apiKey, {})).status).toBe(201)
    // An access token acts with `full`.
    expect((await call("GET", "/api/sandbox/credentials", scoped.token)).status).toBe(200)
  })
})
