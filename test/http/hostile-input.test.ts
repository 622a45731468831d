/**
 * The text rule and paging bounds of DECISIONS.md "Hostile input", end to end over HTTP: every
 * string field refuses NUL, other C0 controls and lone surrogates with 400 VALIDATION_ERROR and
 * the field's path (before this rule, PostgreSQL's refusal of `\0` surfaced as a 500), line breaks
 * pass only where text is multi-line, and `page` stops at 1,000,000 on every paged route.
 */
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { isMultilineText, isText, MAX_PAGE } from "../../effects/shared/schema.ts"
import { allRoutes } from "../../src/http/routes/index.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import type { CallResult } from "../support/app.ts"
import { type AuthTestApp, freshEmail, makeAuthTestApp, PASSWORD } from "../support/auth.ts"

let t: AuthTestApp
let acc: TestAccount
let addressId: number
beforeAll(async () => {
  t = await makeAuthTestApp()
  acc = await createAccount(t.api)
  const created = await t.api.call("POST", "/api/inbound/addresses", { token: acc.apiKey, body: { local_part: "hostile" } })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  addressId = created.body.data.id
})
afterAll(() => t.api.stop())

const NUL = "\u0000"

/** A 400 VALIDATION_ERROR naming `field`, in the envelope. */
const expectFieldError = (res: CallResult, field: string) => {
  expect(res.status, JSON.stringify(res.body)).toBe(400)
  expect(res.body.success).toBe(false)
  expect(typeof res.body.request_id).toBe("string")
  expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code: "VALIDATION_ERROR" })]))
}

describe("the text rule (schema level)", () => {
  it("refuses NUL, other C0 controls and lone surrogates; keeps TAB, CR and LF for multi-line text only", () => {
    const text = Schema.is(Schema.String.check(isText))
    const multi = Schema.is(Schema.String.check(isMultilineText))
    for (const bad of [NUL, "a\u0001b", "\u001f", "\u001b[31m", "\ud800", "x\udc00y", "\udbff"]) {
      expect(text(bad), JSON.stringify(bad)).toBe(false)
      expect(multi(bad), JSON.stringify(bad)).toBe(false)
    }
    for (const lineish of ["a\tb", "a\nb", "a\r\nb"]) {
      expect(text(lineish)).toBe(false)
      expect(multi(lineish)).toBe(true)
    }
    for (const good of ["", "Asha Mwinyi", "Habari 👋🏾", "\u007f", "\u00a0é", "\ud83d\ude00", "日本"]) {
      expect(text(good), JSON.stringify(good)).toBe(true)
      expect(multi(good)).toBe(true)
    }
  })
})

describe("NUL and control characters over HTTP: 400 with the field, never 500", () => {
  it("address label (NUL, lone surrogate, control, line break)", async () => {
    for (const label of [`Sup${NUL}port`, "\ud800", "bell\u0007", "two\nlines"]) {
      const res = await t.api.call("POST", "/api/inbound/addresses", { token: acc.apiKey, body: { local_part: "lbl", label } })
      expectFieldError(res, "label")
    }
    // The same request with a clean label still works.
    const ok = await t.api.call("POST", "/api/inbound/addresses", { token: acc.apiKey, body: { local_part: "lbl", label: "Support ✓" } })
    expect(ok.status).toBe(201)
    expect(ok.body.data.label).toBe("Support ✓")
  })

  it("a lone surrogate written as a JSON escape", async () => {
    const res = await t.api.call("POST", "/api/inbound/addresses", {
      token: acc.apiKey,
      rawBody: '{"local_part":"surrogate","label":"x\\udc00"}',
      headers: { "content-type": "application/json" },
    })
    expectFieldError(res, "label")
  })

  it("register: name, company_name, email", async () => {
    for (const [field, value] of [["name", `A${NUL}sha`], ["company_name", `Kili${NUL}`], ["email", `a${NUL}b@example.co.tz`]] as const) {
      const res = await t.api.call("POST", "/api/auth/register", {
        body: { name: "Asha", password: PASSWORD, email: freshEmail(), [field]: value },
      })
      expectFieldError(res, field)
    }
  })

  it("login identifier (unauthenticated)", async () => {
    const res = await t.api.call("POST", "/api/auth/login", { body: { identifier: `asha${NUL}@example.co.tz`, password: PASSWORD } })
    expectFieldError(res, "identifier")
  })

  it("profile and API key names", async () => {
    expectFieldError(await t.api.call("PATCH", "/api/auth/me", { token: acc.token, body: { name: `x${NUL}` } }), "name")
    expectFieldError(await t.api.call("POST", "/api/apikeys", { token: acc.token, body: { name: `ci${NUL}key` } }), "name")
  })

  it("outbound subject, bodies, variables (keys and values) and path parameters", async () => {
    const send = (body: Record<string, unknown>) =>
      t.api.call("POST", "/api/outbound/emails", { token: acc.apiKey, body: { to: ["a@example.co.tz"], subject: "Hi", text_body: "x", ...body } })
    expectFieldError(await send({ subject: `Re${NUL}ceipt` }), "subject")
    expectFieldError(await send({ subject: "tab\there" }), "subject")
    expectFieldError(await send({ text_body: `a${NUL}b` }), "text_body")
    expectFieldError(await send({ html_body: `<p>${NUL}</p>` }), "html_body")
    expectFieldError(await send({ variables: { name: `As${NUL}ha` } }), "variables.name")
    expectFieldError(await send({ variables: { [`na${NUL}me`]: "Asha" } }), `variables.na${NUL}me`)
    expectFieldError(await send({ from_address: `no${NUL}reply@inbox.localhost` }), "from_address")
    const batch = await t.api.call("POST", "/api/outbound/emails/batch", {
      token: acc.apiKey,
      body: { to: ["a@example.co.tz"], subject: "x", text_body: `y\u0000` },
    })
    expectFieldError(batch, "text_body")
    expectFieldError(await t.api.call("DELETE", "/api/outbound/suppressions/a%00b%40example.co.tz", { token: acc.apiKey }), "email")
  })

  it("template bodies (multi-line kept) and names", async () => {
    const create = (body: Record<string, unknown>) =>
      t.api.call("POST", "/api/outbound/templates", { token: acc.apiKey, body: { name: "t", subject: "s", ...body } })
    expectFieldError(await create({ html_body: `<p>${NUL}</p>` }), "html_body")
    expectFieldError(await create({ text_body: "esc\u001b[0m" }), "text_body")
    expectFieldError(await create({ name: `n${NUL}` }), "name")
    const ok = await create({ text_body: "Habari {{name}},\r\n\tasante.\n" })
    expect(ok.status, JSON.stringify(ok.body)).toBe(201)
    expect(ok.body.data.text_body).toBe("Habari {{name}},\r\n\tasante.\n")
  })

  it("agent persona and draft input", async () => {
    const put = await t.api.call("PUT", `/api/agent/configs/${addressId}`, { token: acc.apiKey, body: { mode: "draft", persona: `Be kind${NUL}` } })
    expectFieldError(put, "persona")
    const multi = await t.api.call("PUT", `/api/agent/configs/${addressId}`, {
      token: acc.apiKey,
      body: { mode: "draft", persona: "Line one.\nLine two." },
    })
    expect(multi.status, JSON.stringify(multi.body)).toBe(200)
    const draft = await t.api.call("POST", `/api/agent/configs/${addressId}/draft`, { token: acc.apiKey, body: { subject: "\ud800" } })
    expectFieldError(draft, "subject")
  })

  it("compliance text", async () => {
    const res = await t.api.call("PATCH", "/api/compliance/profile", { token: acc.apiKey, body: { pdpc_certificate_number: `PDPC${NUL}1` } })
    expectFieldError(res, "pdpc_certificate_number")
    const version = await t.api.call("PATCH", "/api/compliance/profile", { token: acc.apiKey, body: { privacy_policy_version: "v\u0002" } })
    expectFieldError(version, "privacy_policy_version")
  })

  it("webhook URL and secret, SMS provider key, domains, sandbox scopes", async () => {
    const hook = await t.api.call("POST", "/api/webhook/webhooks", {
      token: acc.apiKey,
      body: { address_id: addressId, url: "https://example.co.tz/hook", secret: `s3cret${NUL}xx` },
    })
    expectFieldError(hook, "secret")
    const sms = await t.api.call("POST", "/api/sms/notifications", {
      token: acc.apiKey,
      body: { address_id: addressId, phone_number: "+255712345678", provider_key: `key${NUL}12345` },
    })
    expectFieldError(sms, "provider_key")
    expectFieldError(await t.api.call("POST", "/api/domains", { token: acc.apiKey, body: { domain: `exa${NUL}mple.co.tz` } }), "domain")
    expectFieldError(await t.api.call("POST", "/api/sandbox/credentials", { token: acc.apiKey, body: { scopes: `smtp${NUL}` } }), "scopes")
  })
})

describe("one entry per bad field", () => {
  it("a string that breaks the text rule and the field's own rules is reported once, by the text rule", async () => {
    const res = await t.api.call("POST", "/api/outbound/templates", {
      token: acc.apiKey,
      body: { name: "t", subject: `two\nlines${"x".repeat(1000)}`, text_body: "x" },
    })
    expect(res.status).toBe(400)
    expect(res.body.errors).toEqual([{ field: "subject", code: "VALIDATION_ERROR", message: "must be a single line (no line breaks)" }])
    const local = await t.api.call("POST", "/api/inbound/addresses", { token: acc.apiKey, body: { local_part: `Bad${NUL}` } })
    expect(local.body.errors).toEqual([{ field: "local_part", code: "VALIDATION_ERROR", message: "must not contain control characters" }])
  })
})

describe("paging bounds", () => {
  const paged = allRoutes.filter((r) => r.method === "get" && r.query && "page" in (r.query as unknown as { fields: object }).fields)
  const pathOf = (path: string) => path.replace(/:[a-z_]+/g, String(addressId))

  it("covers every paged route of the table", () => {
    // A guard on the guard: if paging moved out of the shared schema this list would shrink.
    expect(paged.length).toBeGreaterThanOrEqual(8)
  })

  it(`answers page ${MAX_PAGE} and refuses ${MAX_PAGE + 1}, huge and non-integer pages with 400 on every paged route`, async () => {
    for (const r of paged) {
      const base = `${pathOf(r.path)}?address_id=${addressId}`
      const top = await t.api.call("GET", `${base}&page=${MAX_PAGE}`, { token: acc.apiKey })
      expect(top.status, `${r.path} ${JSON.stringify(top.body)}`).toBeLessThan(500)
      expect(top.body.errors?.[0]?.field, r.path).not.toBe("page")
      for (const page of [String(MAX_PAGE + 1), "99999999999999999999", "1e300", "2.5", "-1", "0", "NaN", "Infinity"]) {
        const res = await t.api.call("GET", `${base}&page=${page}`, { token: acc.apiKey })
        expect(res.status, `${r.path} page=${page}: ${JSON.stringify(res.body)}`).toBe(400)
        expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: "page", code: "VALIDATION_ERROR" })]))
      }
    }
  })
})
