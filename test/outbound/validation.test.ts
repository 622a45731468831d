/**
 * Every bad input of POST /api/outbound/emails: 400 VALIDATION_ERROR naming the field by its
 * dotted path, and nothing written, nothing charged, nothing handed to the relay. Also the
 * resources a send names (template, sending domain) answering 404 / 403 the same way.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { TestAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { balance, expectLedgerConsistent, expectNothingWritten, fundedAccount, makeOutboundApp, send, startRelay, type TestRelay } from "./support.ts"

let relay: TestRelay
let api: TestApp
let a: TestAccount
beforeAll(async () => {
  relay = await startRelay()
  api = await makeOutboundApp({ relayUrl: relay.url })
  a = await fundedAccount(api, 1000)
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
})
beforeEach(() => relay.reset())

const MiB = 1024 * 1024
const b64 = (bytes: number) => Buffer.alloc(bytes, 7).toString("base64")
const ok = { to: ["ok@dest.example"], subject: "s", text_body: "t" }
const att = (over: Record<string, unknown> = {}) => ({ filename: "a.txt", content_type: "text/plain", data_base64: b64(3), ...over })
const many = (n: number) => Array.from({ length: n }, (_, i) => `r${i}@dest.example`)

const expectRefused = async (body: unknown, fields: ReadonlyArray<string>, status = 400) => {
  const res = await send(api, a, body)
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  expect(res.body.success).toBe(false)
  if (status === 400) {
    expect(res.body.errors.every((e: { code: string }) => e.code === "VALIDATION_ERROR")).toBe(true)
    expect(res.body.errors.map((e: { field?: string }) => e.field).sort()).toEqual([...fields].sort())
  }
  await expectNothingWritten(api, a.userId)
  expect(await balance(api, a.userId)).toBe(1000)
  expect(relay.received).toEqual([])
  return res
}

describe("recipients", () => {
  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["to as a string", { ...ok, to: "ok@dest.example" }, ["to"]],
    ["a bad address", { ...ok, to: ["not-an-email"] }, ["to.0"]],
    ["the third address", { ...ok, to: ["a@dest.example", "b@dest.example", "c@@dest"] }, ["to.2"]],
    ["a named address without a domain", { ...ok, to: ["Asha <asha>"] }, ["to.0"]],
    ["angle brackets left open", { ...ok, to: ["Asha <asha@dest.example"] }, ["to.0"]],
    ["a header injection", { ...ok, to: ["x@dest.example\r\nBcc: victim@dest.example"] }, ["to.0"]],
    ["a number in cc", { ...ok, cc: [5] }, ["cc.0"]],
    ["an empty bcc entry", { ...ok, bcc: [""] }, ["bcc.0"]],
    ["no recipient at all", { subject: "s", text_body: "t" }, ["to"]],
    ["empty lists", { ...ok, to: [], cc: [], bcc: [] }, ["to"]],
    ["51 recipients in to", { ...ok, to: many(51) }, ["to"]],
    ["51 across to, cc and bcc", { ...ok, to: many(20), cc: many(40).slice(20), bcc: many(51).slice(40) }, ["to"]],
  ])("refuses %s", async (_, body, fields) => {
    await expectRefused(body, fields)
  })

  it("counts duplicates toward the 50 (the cap is on what was sent in)", async () => {
    await expectRefused({ ...ok, to: [...many(50), "r0@dest.example"] }, ["to"])
  })

  it("accepts exactly 50 across to + cc + bcc", async () => {
    const b = await fundedAccount(api, 250)
    const res = await send(api, b, { ...ok, to: many(20), cc: many(40).slice(20), bcc: many(50).slice(40) })
    expect(res.status).toBe(201)
    expect(await balance(api, b.userId)).toBe(0)
  })
})

describe("content", () => {
  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["a missing subject", { to: ["x@dest.example"], text_body: "t" }, ["subject"]],
    ["a blank subject", { ...ok, subject: "   " }, ["subject"]],
    ["a subject over two lines", { ...ok, subject: "a\r\nBcc: x@dest.example" }, ["subject"]],
    ["a subject of 999 characters", { ...ok, subject: "x".repeat(999) }, ["subject"]],
    ["a subject that is not a string", { ...ok, subject: 5 }, ["subject"]],
    ["no body", { to: ["x@dest.example"], subject: "s" }, ["text_body"]],
    ["empty bodies", { ...ok, text_body: "", html_body: "  " }, ["text_body"]],
    ["an html_body that is not a string", { ...ok, html_body: 5 }, ["html_body"]],
    ["a template_id that is not an id", { ...ok, template_id: "x" }, ["template_id"]],
    ["a template_id of 0", { ...ok, template_id: 0 }, ["template_id"]],
    ["a variable that is not a string", { ...ok, variables: { name: 5 } }, ["variables.name"]],
    ["variables as a list", { ...ok, variables: ["a"] }, ["variables"]],
    ["a from_domain_id that is not an id", { ...ok, from_domain_id: "abc" }, ["from_domain_id"]],
    ["a from_address on another domain", { ...ok, from_address: "boss@gmail.com" }, ["from_address"]],
    ["a from_address that is not an address", { ...ok, from_address: "not an address" }, ["from_address"]],
    ["a reserved platform from_address", { ...ok, from_address: "postmaster@inbox.localhost" }, ["from_address"]],
  ])("refuses %s", async (_, body, fields) => {
    await expectRefused(body, fields)
  })

  it("reports every bad field of one request together", async () => {
    await expectRefused({ to: ["bad"], cc: ["also bad"], subject: 7, attachments: [att({ data_base64: "***" })] }, [
      "to.0",
      "cc.0",
      "subject",
      "attachments.0.data_base64",
    ])
  })

  it("refuses malformed JSON with field body", async () => {
    const res = await api.call("POST", "/api/outbound/emails", { token: a.apiKey, rawBody: "{not json", headers: { "content-type": "application/json" } })
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe("body")
    await expectNothingWritten(api, a.userId)
  })
})

describe("attachments", () => {
  it.each<[string, unknown, ReadonlyArray<string>]>([
    ["11 attachments", { ...ok, attachments: Array.from({ length: 11 }, () => att()) }, ["attachments"]],
    ["attachments as an object", { ...ok, attachments: att() }, ["attachments"]],
    ["a missing filename", { ...ok, attachments: [att(), { content_type: "text/plain", data_base64: b64(3) }] }, ["attachments.1.filename"]],
    ["an empty filename", { ...ok, attachments: [att({ filename: "" })] }, ["attachments.0.filename"]],
    ["a filename with a path", { ...ok, attachments: [att({ filename: "../../etc/passwd" })] }, ["attachments.0.filename"]],
    ["a bad content_type", { ...ok, attachments: [att({ content_type: "pdf" })] }, ["attachments.0.content_type"]],
    ["a missing data_base64", { ...ok, attachments: [{ filename: "a", content_type: "text/plain" }] }, ["attachments.0.data_base64"]],
    ["invalid base64 in the third", { ...ok, attachments: [att(), att(), att({ data_base64: "abc$" })] }, ["attachments.2.data_base64"]],
    ["base64 with bad padding", { ...ok, attachments: [att({ data_base64: "QUJD=" })] }, ["attachments.0.data_base64"]],
    ["url-safe base64", { ...ok, attachments: [att({ data_base64: "-_-_" })] }, ["attachments.0.data_base64"]],
    ["a size that does not match", { ...ok, attachments: [att({ size: 4 })] }, ["attachments.0.size"]],
    ["a negative size", { ...ok, attachments: [att({ size: -1 })] }, ["attachments.0.size"]],
    ["a size that is not an integer", { ...ok, attachments: [att({ size: 1.5 })] }, ["attachments.0.size"]],
  ])("refuses %s", async (_, body, fields) => {
    await expectRefused(body, fields)
  })

  it("refuses one attachment over 10 MiB, and more than 20 MiB together", async () => {
    await expectRefused({ ...ok, attachments: [att(), att({ data_base64: b64(10 * MiB + 1) })] }, ["attachments.1.data_base64"])
    await expectRefused({ ...ok, attachments: [att({ data_base64: b64(7 * MiB) }), att({ data_base64: b64(7 * MiB) }), att({ data_base64: b64(7 * MiB) })] }, [
      "attachments",
    ])
  })

  it("accepts 10 MiB exactly, and 20 MiB together", async () => {
    const b = await fundedAccount(api, 100)
    const res = await send(api, b, {
      ...ok,
      attachments: [att({ data_base64: b64(10 * MiB), size: 10 * MiB }), att({ filename: "b.bin", data_base64: b64(10 * MiB) })],
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(relay.received[0]!.raw.length).toBeGreaterThan(20 * MiB)
  })
})

describe("what a send names", () => {
  it("an unknown template is 404, another account's 403; nothing written either way", async () => {
    await expectRefused({ ...ok, template_id: 99_999_999 }, [], 404)
    const other = await fundedAccount(api, 0)
    const t = await api.call("POST", "/api/outbound/templates", { token: other.apiKey, body: { name: "theirs", subject: "s", text_body: "t" } })
    expect(t.status).toBe(201)
    const res = await expectRefused({ ...ok, template_id: t.body.data.id }, [], 403)
    expect(res.body.errors[0].code).toBe("FORBIDDEN")
  })

  it("an unknown sending domain is 404", async () => {
    const res = await expectRefused({ ...ok, from_domain_id: 99_999_999 }, [], 404)
    expect(res.body.errors[0].code).toBe("NOT_FOUND")
    await expectLedgerConsistent(api)
  })

  it("an Idempotency-Key that is not printable ASCII is refused with its field", async () => {
    const res = await send(api, a, ok, { "idempotency-key": "a".repeat(256) })
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe("Idempotency-Key")
    await expectNothingWritten(api, a.userId)
  })
})
