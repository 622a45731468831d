/**
 * Sender addresses over HTTP: recording From local parts on a domain, the default local part
 * listed once the domain is verified, limits, conflicts and ownership.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { addDomain, query, type SendingTestApp, startSendingApp, unique, verifiedDomain } from "./support.ts"

let app: SendingTestApp
beforeAll(async () => {
  app = await startSendingApp()
})
afterAll(() => app.stop())

const addSender = (apiKey: string, domainId: number, local_part: unknown) =>
  app.api.call("POST", `/api/domains/${domainId}/senders`, { token: apiKey, body: { local_part } })
const listSenders = async (apiKey: string) => {
  const r = await app.api.call("GET", "/api/domains/senders/", { token: apiKey })
  expect(r.status).toBe(200)
  return r.body.data as Array<{ id: number; domain_id: number; local_part: string; email: string; created_at: string }>
}

describe("POST /api/domains/:id/senders", () => {
  it("records a sender and answers it", async () => {
    const { apiKey, domain } = await verifiedDomain(app)
    const r = await addSender(apiKey, domain.id, "billing")
    expect(r.status).toBe(201)
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      domain_id: domain.id,
      local_part: "billing",
      email: `billing@${domain.domain}`,
      created_at: expect.stringMatching(/Z$/),
    })
  })

  it("refuses bad local parts (400), duplicates and the default local part (409 CONFLICT)", async () => {
    const { apiKey, domain } = await verifiedDomain(app, { from_local_part: "hello" })
    for (const local_part of ["Billing", "bill_ing", "", "x".repeat(65), 3, null]) {
      const r = await addSender(apiKey, domain.id, local_part)
      expect(r.status, String(local_part)).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field: "local_part", code: "VALIDATION_ERROR" })
    }
    expect((await addSender(apiKey, domain.id, "sales")).status).toBe(201)
    for (const local_part of ["sales", "hello"]) {
      const r = await addSender(apiKey, domain.id, local_part)
      expect(r.status, local_part).toBe(409)
      expect(r.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "local_part" })
    }
  })

  it("allows the same local part on two domains, and senders on a pending domain", async () => {
    const { apiKey, domain } = await verifiedDomain(app)
    const pending = await addDomain(app, apiKey, { domain: unique("later") })
    expect((await addSender(apiKey, domain.id, "info")).status).toBe(201)
    expect((await addSender(apiKey, pending.domain.id, "info")).status).toBe(201)
  })

  it("caps an account at 100 senders across its domains (409 LIMIT_REACHED); defaults do not count", async () => {
    const { apiKey, userId, domain } = await verifiedDomain(app)
    const second = await addDomain(app, apiKey, { domain: unique("second") })
    await query(
      app,
      `INSERT INTO sender_addresses (user_id, domain_id, local_part) SELECT $1, $2, 's' || g FROM generate_series(1, 98) g`,
      [userId, domain.id],
    )
    const results = await Promise.all(["a", "b", "c"].map((l) => addSender(apiKey, second.domain.id, l)))
    expect(results.filter((r) => r.status === 201)).toHaveLength(2)
    expect(results.filter((r) => r.status === 409).map((r) => r.body.errors[0].code)).toEqual(["LIMIT_REACHED"])
    // 100 recorded plus the verified domain's default.
    expect(await listSenders(apiKey)).toHaveLength(101)
  })
})

describe("GET /api/domains/senders", () => {
  it("lists recorded senders of every domain, and a domain's default once it is verified", async () => {
    const { apiKey } = await createAccount(app.api)
    const pending = await addDomain(app, apiKey, { domain: unique("pending"), from_local_part: "hi" })
    expect(await listSenders(apiKey)).toEqual([])
    await addSender(apiKey, pending.domain.id, "team")
    expect((await listSenders(apiKey)).map((s) => s.email)).toEqual([`team@${pending.domain.domain}`])

    const other = await verifiedDomain(app)
    expect((await listSenders(other.apiKey)).map((s) => [s.domain_id, s.email])).toEqual([[other.domain.id, `noreply@${other.domain.domain}`]])
    await query(app, "UPDATE sending_domains SET status = 'suspended' WHERE id = $1", [other.domain.id])
    expect(await listSenders(other.apiKey)).toEqual([])
  })
})

describe("DELETE /api/domains/senders/:id", () => {
  it("deletes a recorded sender; the default goes only with its domain (409)", async () => {
    const { apiKey, domain } = await verifiedDomain(app)
    const sender = (await addSender(apiKey, domain.id, "billing")).body.data
    const [byDefault] = (await listSenders(apiKey)).filter((s) => s.local_part === "noreply")
    const blocked = await app.api.call("DELETE", `/api/domains/senders/${byDefault!.id}`, { token: apiKey })
    expect(blocked.status).toBe(409)
    expect(blocked.body.errors[0].code).toBe("CONFLICT")

    const r = await app.api.call("DELETE", `/api/domains/senders/${sender.id}`, { token: apiKey })
    expect(r.status).toBe(200)
    expect(r.body.data).toEqual({ deleted_sender_id: sender.id })
    expect((await listSenders(apiKey)).map((s) => s.local_part)).toEqual(["noreply"])
    expect((await app.api.call("DELETE", `/api/domains/senders/${sender.id}`, { token: apiKey })).status).toBe(404)
  })

  it("answers 403 for another account's sender and 404 for unknown ids", async () => {
    const { apiKey, domain } = await verifiedDomain(app)
    const sender = (await addSender(apiKey, domain.id, "billing")).body.data
    const stranger = await createAccount(app.api)
    const r = await app.api.call("DELETE", `/api/domains/senders/${sender.id}`, { token: stranger.apiKey })
    expect(r.status).toBe(403)
    expect(r.body.errors[0].code).toBe("FORBIDDEN")
    expect(JSON.stringify(r.body)).not.toContain(domain.domain)
    expect((await app.api.call("DELETE", "/api/domains/senders/99999999", { token: stranger.apiKey })).status).toBe(404)
    expect((await listSenders(apiKey)).map((s) => s.local_part)).toContain("billing")
  })
})
