/**
 * The acceptance suite's client: it drives only the public HTTP API, the way an outside client
 * following SPEC.md and DECISIONS.md would (register → verify → key → calls). The only windows
 * into the service are the ones a user has too: the inbox and the phone (the in-memory outbox
 * stands in for the service log where links and codes go when no provider is configured), and
 * the operator CLI for what DECISIONS.md makes an operator action (disabling an account).
 */
import { Effect } from "effect"
import { expect } from "vitest"
import { hmacSha256Hex, randomHexSync } from "../../effects/shared/crypto.ts"
import { commands } from "../../src/admin/index.ts"
import type { CallOptions, CallResult } from "../support/app.ts"
import { type AuthTestApp, type AuthTestAppOptions, freshEmail, freshPhone, makeAuthTestApp, PASSWORD } from "../support/auth.ts"

export { freshEmail, freshPhone, PASSWORD }
export type { AuthTestApp, CallResult }

export const startService = (options: AuthTestAppOptions = {}): Promise<AuthTestApp> => makeAuthTestApp(options)

/** RFC 3339 UTC with `Z` (DECISIONS.md "Envelope and HTTP"). */
export const RFC3339_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

export const USER_FIELDS = ["company_name", "created_at", "email", "email_verified", "id", "name", "phone_number", "phone_verified"]
export const API_KEY_FIELDS = ["created_at", "expires_at", "id", "key_prefix", "last_used_at", "name", "revoked_at", "scopes", "user_id"]
export const TOPUP_SPEC_FIELDS = ["amount_tzs", "created_at", "id", "provider_reference", "status", "user_id"]

/** The envelope every response carries (SPEC.md "Response envelope", DECISIONS.md). */
export const expectEnvelope = (res: CallResult) => {
  const b = res.body
  expect(typeof b, `not JSON: ${String(b).slice(0, 200)}`).toBe("object")
  expect(typeof b.success).toBe("boolean")
  expect(b.success).toBe(res.status < 300)
  expect(b.timestamp).toMatch(RFC3339_Z)
  expect(Number.isNaN(Date.parse(b.timestamp))).toBe(false)
  expect(typeof b.request_id).toBe("string")
  expect(b.request_id.length).toBeGreaterThan(0)
  expect(res.headers.get("x-request-id")).toBe(b.request_id)
  expect(res.headers.get("content-type") ?? "").toMatch(/^application\/json/)
  const allowed = ["success", "message", "data", "errors", "pagination", "request_id", "timestamp"]
  for (const k of Object.keys(b)) expect(allowed, `unexpected envelope key ${k}`).toContain(k)
  if (b.message !== undefined) expect(typeof b.message).toBe("string")
  if (b.errors !== undefined) {
    expect(Array.isArray(b.errors)).toBe(true)
    for (const e of b.errors) {
      expect(typeof e.code).toBe("string")
      expect(typeof e.message).toBe("string")
      if (e.field !== undefined) expect(e.field).toMatch(/^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$/)
      for (const k of Object.keys(e)) expect(["field", "code", "message"]).toContain(k)
    }
  }
  if (b.pagination !== undefined && b.pagination !== null) {
    expect(Object.keys(b.pagination).sort()).toEqual(["page", "per_page", "total", "total_pages"])
    for (const v of Object.values(b.pagination)) expect(Number.isInteger(v)).toBe(true)
  }
}

/** A success: the status, the envelope, and `data`. */
export const expectOk = (res: CallResult, status = 200) => {
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  expectEnvelope(res)
  expect(res.body.success).toBe(true)
  return res.body.data
}

/** An error answer: status, envelope, success false, a message, and an `errors[]` entry with the code (and field). */
export const expectError = (res: CallResult, status: number, code: string, field?: string) => {
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  expectEnvelope(res)
  expect(res.body.success).toBe(false)
  expect(typeof res.body.message).toBe("string")
  expect(res.body.errors.length).toBeGreaterThan(0)
  const codes = res.body.errors.map((e: { code: string }) => e.code)
  expect(codes, JSON.stringify(res.body.errors)).toContain(code)
  if (field !== undefined) {
    const hit = res.body.errors.find((e: { code: string; field?: string }) => e.code === code && e.field === field)
    expect(hit, `no ${code} entry with field ${field}: ${JSON.stringify(res.body.errors)}`).toBeDefined()
  }
  const text = JSON.stringify(res.body)
  for (const leak of ["at Object.", "node_modules", "SELECT ", "INSERT ", "stack"]) expect(text).not.toContain(leak)
}

/** The API key header forms of SPEC.md "Authentication". */
export const keyHeaders = {
  xApiKey: (key: string) => ({ "x-api-key": key }),
  bearer: (key: string) => ({ authorization: `Bearer ${key}` }),
  raw: (key: string) => ({ authorization: key }),
}

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })

export interface Client {
  readonly t: AuthTestApp
  readonly call: (method: string, path: string, options?: CallOptions) => Promise<CallResult>
}

export const client = (t: AuthTestApp): Client => ({ t, call: (m, p, o) => t.api.call(m, p, o) })

export interface Session {
  readonly token: string
  readonly refreshToken: string
  readonly user: Record<string, any>
  readonly email?: string
  readonly phone?: string
  readonly password: string
}

/** POST /api/auth/register as a client does; checks the 200. */
export const registerVia = async (t: AuthTestApp, body: Record<string, unknown> = {}): Promise<Session> => {
  const email = "email" in body ? body.email as string | undefined : freshEmail()
  const payload = { name: "Zawadi Mushi", password: PASSWORD, ...(email ? { email } : {}), ...body }
  const res = await t.api.call("POST", "/api/auth/register", { body: payload })
  const data = expectOk(res, 200)
  return {
    token: data.token,
    refreshToken: data.refresh_token,
    user: data.user,
    ...(email ? { email } : {}),
    ...(typeof body.phone_number === "string" ? { phone: data.user.phone_number } : {}),
    password: (body.password as string | undefined) ?? PASSWORD,
  }
}

/** Reads the link from the inbox and posts its token, as the verify page does. */
export const verifyEmailVia = async (t: AuthTestApp, email: string) => {
  const token = t.outbox.lastToken(email)
  return expectOk(await t.api.call("POST", "/api/auth/email/verify", { body: { token } }))
}

/** Reads the SMS and posts the code. */
export const verifyPhoneVia = async (t: AuthTestApp, session: Session, phone: string) => {
  const code = t.outbox.lastCode(phone)
  return expectOk(await t.api.call("POST", "/api/auth/phone/verify", { token: session.token, body: { code } }))
}

/** POST /api/apikeys/ (the trailing-slash form SPEC.md writes); checks the 201. */
export const createKeyVia = async (t: AuthTestApp, token: string, body: Record<string, unknown> = {}) => {
  const res = await t.api.call("POST", "/api/apikeys/", { token, body: { name: "ci", ...body } })
  const data = expectOk(res, 201)
  return data as { api_key: Record<string, any>; key: string }
}

export interface Onboarded extends Session {
  readonly key: string
  readonly keyId: number
}

/** Register with an email, verify it through the link, create a `full` key. */
export const onboard = async (t: AuthTestApp, options: { scopes?: string; phone?: boolean } = {}): Promise<Onboarded> => {
  const phone = options.phone ? freshPhone() : undefined
  const s = await registerVia(t, phone ? { phone_number: phone } : {})
  await verifyEmailVia(t, s.email!)
  if (phone) await verifyPhoneVia(t, s, phone)
  const k = await createKeyVia(t, s.token, options.scopes ? { scopes: options.scopes } : {})
  return { ...s, key: k.key, keyId: k.api_key.id }
}

/** The operator CLI (`npm run admin -- <command>`), run on the service's runtime. */
export const operator = (t: AuthTestApp, name: string, ...args: Array<string>) => {
  const command = commands.find((c) => c.name === name)
  if (!command) throw new Error(`no operator command ${name}`)
  return t.api.run(command.run(args, {}) as Effect.Effect<unknown, unknown>)
}

/** A payment gateway event, signed the way DECISIONS.md says (hex HMAC-SHA256 of the raw body). */
export const gatewayEvent = (body: { event: string; provider_reference: string; amount_tzs: number; id?: string; occurred_at?: string }) =>
  JSON.stringify({
    id: body.id ?? `evt_${randomHexSync(8)}`,
    event: body.event,
    provider_reference: body.provider_reference,
    amount_tzs: body.amount_tzs,
    occurred_at: body.occurred_at ?? new Date().toISOString(),
  })

export const signWith = (secret: string, raw: string): Promise<string> => Effect.runPromise(hmacSha256Hex(secret, raw))

export const postGatewayEvent = async (t: AuthTestApp, raw: string, signature?: string | null) => {
  const sig = signature === undefined ? await signWith(t.api.settings.paymentWebhookSecret, raw) : signature
  return t.api.call("POST", "/api/billing/payments/events", {
    rawBody: raw,
    headers: { "content-type": "application/json", ...(sig === null ? {} : { "X-Gateway-Signature": sig }) },
  })
}

/** `npm run admin -- credit ID AMOUNT --reason TEXT`: funds a wallet the way an operator does. */
export const creditVia = (t: AuthTestApp, userId: number, amount: number) => {
  const command = commands.find((c) => c.name === "credit")!
  return t.api.run(command.run([String(userId), String(amount)], { reason: "acceptance" }) as Effect.Effect<unknown, unknown>)
}

/** GET /api/billing/balance. */
export const balanceVia = async (t: AuthTestApp, key: string): Promise<number> =>
  expectOk(await t.api.call("GET", "/api/billing/balance", { token: key })).balance_tzs as number

/** The ledger sum (GET /api/billing/transactions, signed amounts) equals the balance. */
export const expectLedgerMatches = async (t: AuthTestApp, key: string): Promise<number> => {
  const bal = await balanceVia(t, key)
  const res = await t.api.call("GET", "/api/billing/transactions?per_page=100", { token: key })
  const rows = expectOk(res) as Array<{ kind: string; amount_tzs: number }>
  const sum = rows.reduce((acc, r) => acc + (r.kind === "debit" ? -Math.abs(r.amount_tzs) : Math.abs(r.amount_tzs)), 0)
  expect(sum, JSON.stringify(rows)).toBe(bal)
  return bal
}
