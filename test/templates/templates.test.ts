/**
 * Templates: CRUD over HTTP (201, full-replacement PATCH, delete answer), validation and
 * ownership, scope, and `{{key}}` rendering into sends (inline fields override, unknown keys
 * empty, HTML-escaped values, `{{{raw}}}`), checked on the message the relay received.
 */
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { renderHtml, renderText } from "../../effects/templates/render.ts"
import type { TestAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { detail, expectNothingWritten, fundedAccount, makeOutboundApp, rcpt, send, startRelay, type TestRelay } from "../outbound/support.ts"

let relay: TestRelay
let api: TestApp
let me: TestAccount
let other: TestAccount
beforeAll(async () => {
  relay = await startRelay()
  api = await makeOutboundApp({ relayUrl: relay.url })
  me = await fundedAccount(api, 1000)
  other = await fundedAccount(api, 1000)
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
})
beforeEach(() => relay.reset())

const T = "/api/outbound/templates"
const create = (body: unknown, account = me) => api.call("POST", T, { token: account.apiKey, body })
let n = 0
const name = () => `welcome-${++n}`

describe("CRUD", () => {
  it("creates (201), lists, reads, replaces and deletes a template", async () => {
    const nm = name()
    const c = await create({ name: nm, subject: "Karibu {{name}}", html_body: "<p>Hi {{name}}</p>", text_body: "Hi {{name}}" })
    expect(c.status).toBe(201)
    expect(Object.keys(c.body.data).sort()).toEqual(["created_at", "html_body", "id", "name", "subject", "text_body", "updated_at"])
    expect(c.body.data).toMatchObject({ name: nm, subject: "Karibu {{name}}", html_body: "<p>Hi {{name}}</p>", text_body: "Hi {{name}}" })
    const id = c.body.data.id

    const minimal = await create({ name: name() })
    expect(minimal.status).toBe(201)
    expect(minimal.body.data).toMatchObject({ subject: null, html_body: null, text_body: null })

    const list = await api.call("GET", T, { token: me.apiKey })
    expect(list.status).toBe(200)
    expect(list.body.data.map((t: { id: number }) => t.id)).toEqual(expect.arrayContaining([id, minimal.body.data.id]))
    expect((await api.call("GET", T, { token: other.apiKey })).body.data).toEqual([])

    const one = await api.call("GET", `${T}/${id}`, { token: me.apiKey })
    expect(one.body.data).toEqual(c.body.data)

    const replaced = await api.call("PATCH", `${T}/${id}`, {
      token: me.apiKey,
      body: { name: `${nm}-v2`, subject: "New {{name}}", html_body: null, text_body: "only text" },
    })
    expect(replaced.status).toBe(200)
    expect(replaced.body.data).toMatchObject({ id, name: `${nm}-v2`, subject: "New {{name}}", html_body: null, text_body: "only text" })

    const del = await api.call("DELETE", `${T}/${id}`, { token: me.apiKey })
    expect(del.status).toBe(200)
    expect(del.body.data).toEqual({ deleted_template_id: id })
    expect((await api.call("GET", `${T}/${id}`, { token: me.apiKey })).status).toBe(404)
    expect((await api.call("DELETE", `${T}/${id}`, { token: me.apiKey })).status).toBe(404)
  })

  it("PATCH is a full replacement: a missing field is 400 with its name", async () => {
    const id = (await create({ name: name(), subject: "s", text_body: "t" })).body.data.id
    const res = await api.call("PATCH", `${T}/${id}`, { token: me.apiKey, body: { name: "x", subject: "s" } })
    expect(res.status).toBe(400)
    expect(res.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(["html_body", "text_body"])
    expect((await api.call("GET", `${T}/${id}`, { token: me.apiKey })).body.data).toMatchObject({ subject: "s", text_body: "t" })
  })

  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["a missing name", { subject: "s" }, ["name"]],
    ["an empty name", { name: "" }, ["name"]],
    ["a name of 201 characters", { name: "x".repeat(201) }, ["name"]],
    ["a subject over two lines", { name: "n", subject: "a\nb" }, ["subject"]],
    ["a body that is not a string", { name: "n", html_body: 5 }, ["html_body"]],
  ])("refuses %s with 400", async (_, body, fields) => {
    const before = (await api.call("GET", T, { token: me.apiKey })).body.data.length
    const res = await create(body)
    expect(res.status).toBe(400)
    expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual(fields)
    expect((await api.call("GET", T, { token: me.apiKey })).body.data.length).toBe(before)
  })

  it("a body over 512 KiB characters is 400 with its field, on create and on replace", async () => {
    const long = "x".repeat(512 * 1024 + 1)
    const before = (await api.call("GET", T, { token: me.apiKey })).body.data.length
    for (const field of ["html_body", "text_body"]) {
      const res = await create({ name: name(), [field]: long })
      expect(res.status).toBe(400)
      expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual([field])
    }
    expect((await api.call("GET", T, { token: me.apiKey })).body.data.length).toBe(before)
    const id = (await create({ name: name(), text_body: "x".repeat(512 * 1024) })).body.data.id
    const replaced = await api.call("PATCH", `${T}/${id}`, { token: me.apiKey, body: { name: name(), subject: null, html_body: long, text_body: null } })
    expect(replaced.status).toBe(400)
    expect((await api.call("GET", `${T}/${id}`, { token: me.apiKey })).body.data.html_body).toBeNull()
  })

  it("an account keeps at most 100 templates: the next is 409 LIMIT_REACHED, two at once cannot both take the last slot", async () => {
    const full = await fundedAccount(api, 0, { scopes: "templates" })
    for (let i = 0; i < 99; i++) expect((await create({ name: `t${i}` }, full)).status).toBe(201)
    const both = await Promise.all([create({ name: "last-a" }, full), create({ name: "last-b" }, full)])
    expect(both.map((r) => r.status).sort()).toEqual([201, 409])
    const over = both.find((r) => r.status === 409)!
    expect(over.body.errors[0]).toMatchObject({ code: "LIMIT_REACHED" })
    expect((await api.call("GET", T, { token: full.apiKey })).body.data).toHaveLength(100)
    // Deleting one frees its slot.
    const first = (await api.call("GET", T, { token: full.apiKey })).body.data[0].id
    expect((await api.call("DELETE", `${T}/${first}`, { token: full.apiKey })).status).toBe(200)
    expect((await create({ name: "again" }, full)).status).toBe(201)
  })

  it("names are unique per account: 409 CONFLICT on create and on replace", async () => {
    const nm = name()
    expect((await create({ name: nm })).status).toBe(201)
    const dup = await create({ name: nm })
    expect(dup.status).toBe(409)
    expect(dup.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "name" })
    expect((await create({ name: nm }, other)).status).toBe(201)
    const second = (await create({ name: name() })).body.data.id
    const clash = await api.call("PATCH", `${T}/${second}`, { token: me.apiKey, body: { name: nm, subject: null, html_body: null, text_body: null } })
    expect(clash.status).toBe(409)
  })

  it("another account's template is 403 on every route; unknown is 404", async () => {
    const id = (await create({ name: name(), subject: "secret subject" })).body.data.id
    for (const [method, body] of [["GET", undefined], ["PATCH", { name: "x", subject: null, html_body: null, text_body: null }], ["DELETE", undefined]] as const) {
      const res = await api.call(method, `${T}/${id}`, { token: other.apiKey, ...(body ? { body } : {}) })
      expect(res.status).toBe(403)
      expect(JSON.stringify(res.body)).not.toContain("secret subject")
    }
    expect((await api.call("GET", `${T}/99999999`, { token: me.apiKey })).status).toBe(404)
    expect((await api.call("GET", `${T}/abc`, { token: me.apiKey })).status).toBe(400)
  })

  it("needs the templates scope", async () => {
    const narrow = await fundedAccount(api, 0, { scopes: "outbound:send,outbound:read" })
    expect((await create({ name: name() }, narrow)).status).toBe(403)
    expect((await api.call("GET", T, { token: narrow.apiKey })).status).toBe(403)
    const scoped = await fundedAccount(api, 0, { scopes: "templates" })
    expect((await create({ name: name() }, scoped)).status).toBe(201)
    expect((await api.call("GET", T)).status).toBe(401)
  })
})

describe("rendering into a send", () => {
  it("fills {{key}} from variables; unknown keys render empty; HTML values are escaped", async () => {
    const t = await create({
      name: name(),
      subject: "Karibu {{ name }}, order {{order}}",
      html_body: "<p>Hi {{name}} {{missing}}</p><p>{{{banner}}}</p>",
      text_body: "Hi {{name}}{{missing}}!",
    })
    const to = rcpt()
    const res = await send(api, me, {
      to: [to],
      template_id: t.body.data.id,
      variables: { name: "Asha <b>&", order: "42", banner: "<b>Sale</b>", constructor: "x" },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(res.body.data.subject).toBe("Karibu Asha <b>&, order 42")
    expect(res.body.data.text_body).toBe("Hi Asha <b>&!")
    expect(res.body.data.html_body).toBe("<p>Hi Asha &lt;b&gt;&amp; </p><p><b>Sale</b></p>")
    const parsed = await simpleParser(relay.to(to)[0]!.raw)
    expect(parsed.subject).toBe("Karibu Asha <b>&, order 42")
    expect(parsed.text?.trim()).toBe("Hi Asha <b>&!")
  })

  it("inline fields override the template's; a template without the needed fields is 400", async () => {
    const t = await create({ name: name(), subject: "From template {{x}}", html_body: "<p>template html</p>", text_body: "template text" })
    const res = await send(api, me, { to: [rcpt()], template_id: t.body.data.id, subject: "Inline {{x}}", text_body: "inline text", variables: { x: "1" } })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({ subject: "Inline 1", text_body: "inline text", html_body: "<p>template html</p>" })

    const empty = await create({ name: name() })
    const refused = await send(api, me, { to: [rcpt()], template_id: empty.body.data.id })
    expect(refused.status).toBe(400)
    expect(refused.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(["subject", "text_body"])
    // The inline fields complete it.
    expect((await send(api, me, { to: [rcpt()], template_id: empty.body.data.id, subject: "s", html_body: "<p>h</p>" })).status).toBe(201)
  })

  it("a variable cannot put a line break into the Subject header", async () => {
    const t = await create({ name: name(), subject: "Hi {{name}}", text_body: "t" })
    const to = rcpt()
    const res = await send(api, me, { to: [to], template_id: t.body.data.id, variables: { name: "x\r\nBcc: victim@dest.example" } })
    expect(res.status).toBe(201)
    expect(res.body.data.subject).toBe("Hi x Bcc: victim@dest.example")
    expect(relay.received[0]!.to).toEqual([to])
    expect(relay.received[0]!.raw).not.toMatch(/^Bcc:/m)
  })

  // Placeholders and a long value multiply: 100,000 `{{a}}` (500 KB) and a 400-character value
  // would render 40 M characters, past the request body limit (MAX_BODY_BYTES, 30 MiB in tests).
  // It was a 500 (V8's string length) after rendering hundreds of MB; now a 400 before sending,
  // charging or storing anything.
  it.each<[string, Record<string, unknown>, string]>([
    ["a text body", { subject: "s", text_body: "{{a}}".repeat(100_000) }, "text_body"],
    ["an HTML body, its values escaped", { subject: "s", html_body: "<p>{{a}}</p>".repeat(100_000) }, "html_body"],
  ])("refuses %s that renders past the request body limit with 400, nothing sent or charged", async (_, content, field) => {
    const fresh = await fundedAccount(api, 1000)
    const res = await send(api, fresh, { to: [rcpt()], ...content, variables: { a: "&".repeat(400) } })
    expect(res.status).toBe(400)
    expect(res.body.errors).toEqual([expect.objectContaining({ code: "VALIDATION_ERROR", field })])
    await expectNothingWritten(api, fresh.userId)
    expect(relay.received).toEqual([])
    // The same template with a short value is sent as usual.
    expect((await send(api, fresh, { to: [rcpt()], ...content, variables: { a: "x" } })).status).toBe(201)
  })

  it("refuses a subject that renders past one header line (998 characters) with 400", async () => {
    const fresh = await fundedAccount(api, 1000)
    const t = await create({ name: name(), subject: "Hi {{name}}", text_body: "t" }, fresh)
    const res = await send(api, fresh, { to: [rcpt()], template_id: t.body.data.id, variables: { name: "x".repeat(996) } })
    expect(res.status).toBe(400)
    expect(res.body.errors).toEqual([expect.objectContaining({ field: "subject" })])
    await expectNothingWritten(api, fresh.userId)
    const fits = await send(api, fresh, { to: [rcpt()], template_id: t.body.data.id, variables: { name: "x".repeat(995) } })
    expect(fits.status, JSON.stringify(fits.body)).toBe(201)
    expect(fits.body.data.subject).toHaveLength(998)
  })

  it("without a template or variables, a literal {{ stays as written", async () => {
    const res = await send(api, me, { to: [rcpt()], subject: "{{not a placeholder}}", text_body: "{{x}}" })
    expect(res.body.data).toMatchObject({ subject: "{{not a placeholder}}", text_body: "{{x}}" })
  })

  it("messages keep their content when the template is deleted", async () => {
    const t = await create({ name: name(), subject: "Kept", text_body: "kept body" })
    const sent = await send(api, me, { to: [rcpt()], template_id: t.body.data.id })
    expect((await api.call("DELETE", `${T}/${t.body.data.id}`, { token: me.apiKey })).status).toBe(200)
    expect((await detail(api, me, sent.body.data.id)).body.data).toMatchObject({ subject: "Kept", text_body: "kept body" })
    expect((await send(api, me, { to: [rcpt()], template_id: t.body.data.id })).status).toBe(404)
  })
})

describe("render functions", () => {
  it("replace own keys only, tolerate spaces, leave other braces alone", () => {
    expect(renderText("{{a}} {{ a }} {{b}} {{__proto__}} {{toString}} { {a} } {{}}", { a: "1" })).toBe("1 1    { {a} } {{}}")
    expect(renderHtml(`{{a}}|{{{a}}}`, { a: `<"'&>` })).toBe(`&lt;&quot;&#39;&amp;&gt;|<"'&>`)
    expect(renderText("{{{a}}}", { a: "<x>" })).toBe("<x>")
    // A value used escaped and raw, more than once: each use as it asks.
    expect(renderHtml("{{a}}{{{a}}}{{ a }}{{{ a }}}", { a: "<" })).toBe("&lt;<&lt;<")
  })

  it("stop past their limit: undefined at one character over, the text at exactly the limit", () => {
    expect(renderText("ab{{a}}c", { a: "xyz" }, 6)).toBe("abxyzc")
    expect(renderText("ab{{a}}c", { a: "xyz" }, 5)).toBeUndefined()
    // The text after the last placeholder counts, and so does a template without any.
    expect(renderText("{{a}}cd", { a: "x" }, 2)).toBeUndefined()
    expect(renderText("abc", {}, 2)).toBeUndefined()
    // HTML counts the escaped value.
    expect(renderHtml("{{a}}", { a: "&" }, 5)).toBe("&amp;")
    expect(renderHtml("{{a}}", { a: "&" }, 4)).toBeUndefined()
    expect(renderText("{{a}}".repeat(1_000_000), { a: "x".repeat(1_000) }, 10_000)).toBeUndefined()
  })
})
