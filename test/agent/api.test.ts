/**
 * The AI auto-reply endpoints over HTTP: configs (defaults, update, validation, ownership,
 * scope, reply_from rules), the draft preview against the fake gateway (request asserted,
 * errors mapped, 503 without a gateway), and the review lists.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEFAULT_PERSONA } from "../../effects/agent/prompt.ts"
import { AppConfig } from "../../effects/config.ts"
import { Database } from "../../effects/ports/Database.ts"
import { generateDkimKeyPair, sealDkimKey } from "../../effects/sending-domains/dkim.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress } from "../support/inbound-fixtures.ts"
import { AI_MODEL, makeFakeAi } from "./support.ts"

const ai = makeFakeAi()
let api: TestApp
let bare: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false, settings: ai.settings, infrastructure: ai.layer })
  bare = await makeTestApp({ workers: false })
})
afterAll(async () => {
  await api?.stop()
  await bare?.stop()
})

const setup = async (app: TestApp = api, scopes?: string) => {
  const account = await createAccount(app, scopes ? { scopes } : {})
  const addressId = await createAddress(app, account.userId, `agent-${Math.random().toString(16).slice(2, 8)}`)
  return { account, addressId }
}

const put = (account: TestAccount, addressId: number, body: unknown, app: TestApp = api) =>
  app.call("PUT", `/api/agent/configs/${addressId}`, { token: account.apiKey, body })

const sendingDomain = (userId: number, status: "pending" | "verified" | "suspended") =>
  api.run(Effect.gen(function*() {
    const db = yield* Database
    const config = yield* AppConfig
    const keys = yield* generateDkimKeyPair
    const domain = `duka-${Math.random().toString(16).slice(2, 8)}.co.tz`
    const [row] = yield* db.query<{ id: number }>(
      `INSERT INTO sending_domains (user_id, domain, status, from_local_part, dkim_public_key, dkim_private_key_sealed)
       VALUES ($1, $2, $3, 'hello', $4, $5) RETURNING id`,
      [userId, domain, status, keys.publicKey, yield* sealDkimKey(config.secretsKey, keys.privateKeyPem)],
    )
    yield* db.query("INSERT INTO sender_addresses (user_id, domain_id, local_part, is_default) VALUES ($1, $2, 'hello', true)", [userId, row!.id])
    return { id: row!.id, domain }
  }))

describe("configs", () => {
  it("reads the defaults when none is stored", async () => {
    const { account, addressId } = await setup()
    const res = await api.call("GET", `/api/agent/configs/${addressId}`, { token: account.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual({
      address_id: addressId,
      user_id: account.userId,
      mode: "off",
      persona: null,
      enabled: true,
      reply_from_domain_id: null,
      reply_from_address: null,
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    })
    const list = await api.call("GET", "/api/agent/configs", { token: account.apiKey })
    expect(list.body.data).toEqual([])
  })

  it("stores a config, keeps omitted fields on the next PUT, clears with null, and lists the account's configs only", async () => {
    const { account, addressId } = await setup()
    const second = await createAddress(api, account.userId)
    const other = await setup()
    await put(other.account, other.addressId, { mode: "auto" })

    const first = await put(account, addressId, { mode: "draft", persona: "You are Duka Bora's helpful assistant.", reply_from_address: "care@inbox.localhost" })
    expect(first.status).toBe(200)
    expect(first.body.data).toMatchObject({
      address_id: addressId,
      user_id: account.userId,
      mode: "draft",
      persona: "You are Duka Bora's helpful assistant.",
      enabled: true,
      reply_from_domain_id: null,
      reply_from_address: "care@inbox.localhost",
    })
    const next = await put(account, addressId, { mode: "auto", enabled: false })
    expect(next.body.data).toMatchObject({ mode: "auto", enabled: false, persona: "You are Duka Bora's helpful assistant.", reply_from_address: "care@inbox.localhost" })
    const cleared = await put(account, addressId, { mode: "auto", persona: null, reply_from_address: null })
    expect(cleared.body.data).toMatchObject({ mode: "auto", enabled: false, persona: null, reply_from_address: null })
    await put(account, second, { mode: "off" })

    const got = await api.call("GET", `/api/agent/configs/${addressId}`, { token: account.apiKey })
    expect(got.body.data).toEqual(cleared.body.data)
    const list = await api.call("GET", "/api/agent/configs", { token: account.apiKey })
    expect(list.body.data.map((c: { address_id: number }) => c.address_id)).toEqual([addressId, second])
  })

  it.each([
    ["an unknown mode", { mode: "sometimes" }, "mode"],
    ["no mode", { enabled: true }, "mode"],
    ["a persona over 4000 characters", { mode: "draft", persona: "x".repeat(4001) }, "persona"],
    ["enabled that is not a boolean", { mode: "draft", enabled: "yes" }, "enabled"],
    ["a reply_from_address that is not an address", { mode: "auto", reply_from_address: "not an address" }, "reply_from_address"],
    ["a reply_from_address on a foreign domain (From rules)", { mode: "auto", reply_from_address: "care@gmail.com" }, "reply_from_address"],
    ["a reserved platform local part", { mode: "auto", reply_from_address: "postmaster@inbox.localhost" }, "reply_from_address"],
  ])("refuses %s with 400 VALIDATION_ERROR on that field", async (_, body, field) => {
    const { account, addressId } = await setup()
    const res = await put(account, addressId, body)
    expect(res.status).toBe(400)
    expect(res.body.success).toBe(false)
    expect(res.body.errors).toContainEqual(expect.objectContaining({ field, code: "VALIDATION_ERROR" }))
    // Nothing was stored.
    expect((await api.call("GET", `/api/agent/configs/${addressId}`, { token: account.apiKey })).body.data.mode).toBe("off")
  })

  it("accepts a persona of exactly 4000 characters", async () => {
    const { account, addressId } = await setup()
    const res = await put(account, addressId, { mode: "draft", persona: "p".repeat(4000) })
    expect(res.status).toBe(200)
    expect(res.body.data.persona).toHaveLength(4000)
  })

  it("checks reply_from_domain_id with the sending-domain rules", async () => {
    const { account, addressId } = await setup()
    const other = await createAccount(api)
    const verified = await sendingDomain(account.userId, "verified")
    const pending = await sendingDomain(account.userId, "pending")
    const foreign = await sendingDomain(other.userId, "verified")

    const ok = await put(account, addressId, { mode: "auto", reply_from_domain_id: verified.id, reply_from_address: `hello@${verified.domain}` })
    expect(ok.status).toBe(200)
    expect(ok.body.data).toMatchObject({ reply_from_domain_id: verified.id, reply_from_address: `hello@${verified.domain}` })

    const unknownSender = await put(account, addressId, { mode: "auto", reply_from_domain_id: verified.id, reply_from_address: `sales@${verified.domain}` })
    expect(unknownSender.status).toBe(400)
    expect(unknownSender.body.errors[0]).toMatchObject({ field: "reply_from_address", code: "VALIDATION_ERROR" })
    expect((await put(account, addressId, { mode: "auto", reply_from_domain_id: pending.id, reply_from_address: null })).body.errors[0].code).toBe("FORBIDDEN")
    expect((await put(account, addressId, { mode: "auto", reply_from_domain_id: foreign.id, reply_from_address: null })).status).toBe(403)
    const missing = await put(account, addressId, { mode: "auto", reply_from_domain_id: 987_654_321, reply_from_address: null })
    expect(missing.status).toBe(404)
    expect(missing.body.errors[0].code).toBe("NOT_FOUND")
    // The refusals changed nothing.
    const got = await api.call("GET", `/api/agent/configs/${addressId}`, { token: account.apiKey })
    expect(got.body.data).toMatchObject({ reply_from_domain_id: verified.id, reply_from_address: `hello@${verified.domain}` })
  })

  it("answers 403 for another account's address and 404 for a missing one, on every route", async () => {
    const mine = await setup()
    const theirs = await setup()
    await put(theirs.account, theirs.addressId, { mode: "auto", persona: "secret persona" })
    const routes: Array<[string, string, unknown?]> = [
      ["GET", `/api/agent/configs/ID`],
      ["PUT", `/api/agent/configs/ID`, { mode: "off" }],
      ["POST", `/api/agent/configs/ID/draft`, { subject: "Hi" }],
      ["GET", `/api/agent/drafts?address_id=ID`],
      ["GET", `/api/agent/jobs?address_id=ID`],
    ]
    for (const [method, path, body] of routes) {
      const forbidden = await api.call(method, path.replace("ID", String(theirs.addressId)), { token: mine.account.apiKey, body })
      expect(forbidden.status, `${method} ${path}`).toBe(403)
      expect(forbidden.body.errors[0].code).toBe("FORBIDDEN")
      expect(JSON.stringify(forbidden.body)).not.toContain("secret persona")
      const missing = await api.call(method, path.replace("ID", "987654321"), { token: mine.account.apiKey, body })
      expect(missing.status, `${method} ${path}`).toBe(404)
    }
    // Theirs is untouched.
    const still = await api.call("GET", `/api/agent/configs/${theirs.addressId}`, { token: theirs.account.apiKey })
    expect(still.body.data).toMatchObject({ mode: "auto", persona: "secret persona" })
  })

  it("needs the agent scope and credentials", async () => {
    const limited = await setup(api, "inbound:read,sms")
    const res = await api.call("GET", `/api/agent/configs/${limited.addressId}`, { token: limited.account.apiKey })
    expect(res.status).toBe(403)
    const scoped = await setup(api, "agent")
    expect((await api.call("GET", `/api/agent/configs/${scoped.addressId}`, { token: scoped.account.apiKey })).status).toBe(200)
    expect((await api.call("GET", "/api/agent/configs")).status).toBe(401)
  })
})

describe("draft preview", () => {
  it("writes a draft with the default persona, sending the message to the gateway, and never sends or stores it", async () => {
    const { account, addressId } = await setup()
    ai.behave()
    const before = ai.requests.length
    const res = await api.call("POST", `/api/agent/configs/${addressId}/draft`, {
      token: account.apiKey,
      body: { subject: "Bei ya mchele", text_body: "How much is a 25 kg bag of rice, delivered to Mwanza?" },
    })
    expect(res.status).toBe(200)
    expect(res.body.message).toBe("draft generated")
    expect(res.body.data).toEqual({ draft: expect.stringMatching(/^Habari Neema,/) })
    expect(ai.requests.length - before).toBe(1)
    const sent = ai.requests[before]!.body
    expect(sent.model).toBe(AI_MODEL)
    expect(sent.messages[0]!.role).toBe("system")
    expect(sent.messages[0]!.content).toContain(DEFAULT_PERSONA)
    expect(sent.messages[0]!.content).toMatch(/Never invent facts: do not state prices/)
    expect(sent.messages[0]!.content).toMatch(/a member of the team will follow up/)
    expect(sent.messages[0]!.content).toMatch(/replying from the mailbox agent-[0-9a-f]+@inbox\.localhost/)
    expect(sent.messages.at(-1)).toEqual({ role: "user", content: expect.stringContaining("How much is a 25 kg bag of rice, delivered to Mwanza?") })
    expect(sent.messages.at(-1)!.content).toContain("Subject: Bei ya mchele")
    const drafts = await api.call("GET", `/api/agent/drafts?address_id=${addressId}`, { token: account.apiKey })
    expect(drafts.body.data).toEqual([])
  })

  it("uses the address's persona, with either field alone", async () => {
    const { account, addressId } = await setup()
    await put(account, addressId, { mode: "off", persona: "You are Zawadi, the front desk of Kilimanjaro Lodge. Sign as Zawadi." })
    const before = ai.requests.length
    const onlySubject = await api.call("POST", `/api/agent/configs/${addressId}/draft`, { token: account.apiKey, body: { subject: "Booking for December" } })
    expect(onlySubject.status).toBe(200)
    const onlyBody = await api.call("POST", `/api/agent/configs/${addressId}/draft`, { token: account.apiKey, body: { text_body: "Is breakfast included?" } })
    expect(onlyBody.status).toBe(200)
    const [a, b] = ai.requests.slice(before)
    expect(a!.body.messages[0]!.content).toMatch(/^You are Zawadi, the front desk of Kilimanjaro Lodge/)
    expect(a!.body.messages[0]!.content).not.toContain(DEFAULT_PERSONA)
    expect(a!.body.messages.at(-1)!.content).toContain("Subject: Booking for December")
    expect(b!.body.messages.at(-1)!.content).toContain("Is breakfast included?")
  })

  it.each([
    ["an empty body", {}],
    ["empty strings", { subject: "", text_body: "" }],
    ["whitespace only", { subject: "   ", text_body: "\n\t" }],
  ])("refuses %s with 400 VALIDATION_ERROR and calls nobody", async (_, body) => {
    const { account, addressId } = await setup()
    const before = ai.requests.length
    const res = await api.call("POST", `/api/agent/configs/${addressId}/draft`, { token: account.apiKey, body })
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ code: "VALIDATION_ERROR" })
    expect(ai.requests.length).toBe(before)
  })

  it("refuses a wrong type with 400", async () => {
    const { account, addressId } = await setup()
    const res = await api.call("POST", `/api/agent/configs/${addressId}/draft`, { token: account.apiKey, body: { subject: 42 } })
    expect(res.status).toBe(400)
    expect(res.body.errors[0]).toMatchObject({ field: "subject", code: "VALIDATION_ERROR" })
  })

  it.each([
    ["a 500", { status: 500, fixture: "server-error" }],
    ["a 429", { status: 429, fixture: "rate-limited" }],
    ["a 401", { status: 401, fixture: "invalid-key" }],
    ["empty choices", { status: 200, fixture: "empty-choices" }],
  ] as const)("answers 502 PROVIDER_ERROR on %s, without the provider's text", async (_, answer) => {
    const { account, addressId } = await setup()
    ai.behave(answer)
    const res = await api.call("POST", `/api/agent/configs/${addressId}/draft`, { token: account.apiKey, body: { subject: "Hi" } })
    ai.behave()
    expect(res.status).toBe(502)
    expect(res.body.errors[0].code).toBe("PROVIDER_ERROR")
    expect(JSON.stringify(res.body)).not.toMatch(/sk-|trace id|Rate limit|Incorrect API key|HTTP \d/)
  })

  it("answers 503 NOT_CONFIGURED when the AI gateway is not configured", async () => {
    const { account, addressId } = await setup(bare)
    const res = await bare.call("POST", `/api/agent/configs/${addressId}/draft`, { token: account.apiKey, body: { subject: "Hi", text_body: "Hello" } })
    expect(res.status).toBe(503)
    expect(res.body.success).toBe(false)
    expect(res.body.errors[0].code).toBe("NOT_CONFIGURED")
    // Configs still work without a gateway.
    expect((await put(account, addressId, { mode: "draft" }, bare)).status).toBe(200)
  })
})

describe("review lists", () => {
  it("page through drafts and jobs with the usual paging rules", async () => {
    const { account, addressId } = await setup()
    const drafts = await api.call("GET", `/api/agent/drafts?address_id=${addressId}&page=1&per_page=5`, { token: account.apiKey })
    expect(drafts.status).toBe(200)
    expect(drafts.body.pagination).toEqual({ page: 1, per_page: 5, total: 0, total_pages: 0 })
    const bad = await api.call("GET", `/api/agent/jobs?address_id=${addressId}&per_page=500`, { token: account.apiKey })
    expect(bad.status).toBe(400)
    expect(bad.body.errors[0].field).toBe("per_page")
    const noAddress = await api.call("GET", "/api/agent/drafts", { token: account.apiKey })
    expect(noAddress.status).toBe(400)
    expect(noAddress.body.errors[0].field).toBe("address_id")
  })
})
