import { type Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { receivingDomainRecheckWorker } from "../../src/workers/receiving-domains.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { createAccount } from "../support/accounts.ts"
import { sendRaw } from "../support/smtp-client.ts"
import { countMessages, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp({ settings: { domainRecheckInterval: "1 hour" as never } })
})
afterAll(() => app.stop())

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}.co.tz`
const add = (apiKey: string, domain: unknown) => app.api.call("POST", "/api/inbound/domains", { token: apiKey, body: { domain } })
const verify = (apiKey: string, id: number) => app.api.call("POST", `/api/inbound/domains/${id}/verify`, { token: apiKey })

/** Publishes the three records the API asked for. */
const publish = (domain: { domain: string; verification_records: Array<{ type: string; host: string; value: string }> }) => {
  for (const r of domain.verification_records) {
    const name = r.host === "@" ? domain.domain : r.host
    app.dns.set(name, r.type as "TXT" | "MX" | "A", [r.value])
  }
}

/** One round of the re-check worker, `ahead` past now (so every verified domain is due). */
const recheck = (ahead: Duration.Input = "2 hours") =>
  app.api.run(
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      yield* TestClock.adjust(ahead)
      return yield* runOnce(receivingDomainRecheckWorker("1 hour"))
    }).pipe(Effect.provide(TestClock.layer())),
  )

const verifiedDomain = async () => {
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, 1000)
  const created = await add(account.apiKey, unique("shop"))
  publish(created.body.data)
  const v = await verify(account.apiKey, created.body.data.id)
  expect(v.body.data.status).toBe("verified")
  return { ...account, domain: v.body.data }
}

describe("POST /api/inbound/domains", () => {
  it("adds a domain and returns the TXT, MX and A records to publish", async () => {
    const { apiKey } = await createAccount(app.api)
    const name = unique("Duka")
    const r = await add(apiKey, ` ${name.toUpperCase()}. `)
    expect(r.status).toBe(201)
    const d = r.body.data
    expect(d).toEqual({
      id: expect.any(Number),
      domain: name.toLowerCase(),
      status: "pending",
      verified_at: null,
      created_at: expect.stringMatching(/Z$/),
      verification_record: { type: "TXT", host: "@", value: expect.stringMatching(/^mail-verify=[0-9a-f]{64}$/) },
      verification_records: [
        { type: "TXT", host: "@", value: d.verification_record.value },
        { type: "MX", host: "@", value: "10 mx.inbox.localhost" },
        { type: "A", host: "mx.inbox.localhost", value: "127.0.0.1" },
      ],
    })
    const list = await app.api.call("GET", "/api/inbound/domains", { token: apiKey })
    expect(list.body.data).toEqual([d])
    const again = await add(apiKey, name)
    expect(again.status).toBe(409)
    expect(again.body.errors[0].code).toBe("CONFLICT")
  })

  it("refuses malformed names and the platform's own domain with 400", async () => {
    const { apiKey } = await createAccount(app.api)
    for (const domain of ["localhost", "-bad.co.tz", "a..b.tz", `${"x".repeat(64)}.com`, "exa mple.com", "例え.jp", "", 123, null, "inbox.localhost", "sub.inbox.localhost", "mx.inbox.localhost"]) {
      const r = await add(apiKey, domain)
      expect(r.status, String(domain)).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field: "domain", code: "VALIDATION_ERROR" })
    }
    expect((await add(apiKey, "xn--r8jz45g.jp")).status).toBe(201)
  })

  it("caps an account at 100 receiving domains (409 LIMIT_REACHED)", async () => {
    const { apiKey } = await createAccount(app.api)
    const results = await Promise.all(Array.from({ length: 101 }, (_, i) => add(apiKey, `d${i}-${unique("cap")}`)))
    expect(results.filter((r) => r.status === 201)).toHaveLength(100)
    expect(results.filter((r) => r.status === 409).map((r) => r.body.errors[0].code)).toEqual(["LIMIT_REACHED"])
  })
})

describe("POST /api/inbound/domains/:id/verify", () => {
  it("answers 200 PENDING with the domain until TXT, MX and A are all in DNS, then verifies", async () => {
    const { apiKey } = await createAccount(app.api)
    const created = (await add(apiKey, unique("pole"))).body.data
    const pending = await verify(apiKey, created.id)
    expect(pending.status).toBe(200)
    expect(pending.body.success).toBe(false)
    expect(pending.body.errors).toEqual([{ code: "PENDING", message: expect.stringContaining("TXT, MX") }])
    expect(pending.body.data).toMatchObject({ id: created.id, domain: created.domain, status: "pending", verified_at: null })

    app.dns.set(created.domain, "TXT", ["v=spf1 -all", created.verification_record.value])
    const half = await verify(apiKey, created.id)
    expect(half.body.errors[0].code).toBe("PENDING")
    expect(half.body.errors[0].message).toContain("MX")
    expect(half.body.errors[0].message).not.toContain("TXT")

    app.dns.set(created.domain, "MX", ["20 backup.example.net", "10 MX.INBOX.LOCALHOST."])
    const done = await verify(apiKey, created.id)
    expect(done.status).toBe(200)
    expect(done.body.success).toBe(true)
    expect(done.body.data).toMatchObject({ status: "verified", verified_at: expect.stringMatching(/Z$/) })
    expect((await verify(apiKey, created.id)).body.data.verified_at).toBe(done.body.data.verified_at)
  })

  it("lets another account claim the same name, but only the DNS owner's claim verifies", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const name = unique("contested")
    const claimA = (await add(a.apiKey, name)).body.data
    const claimB = await add(b.apiKey, name)
    expect(claimB.status).toBe(201)
    expect(claimB.body.data.verification_record.value).not.toBe(claimA.verification_record.value)
    publish(claimA)
    expect((await verify(a.apiKey, claimA.id)).body.data.status).toBe("verified")
    expect((await verify(b.apiKey, claimB.body.data.id)).body.errors[0].code).toBe("PENDING")
    app.dns.set(name, "TXT", [claimA.verification_record.value, claimB.body.data.verification_record.value])
    const late = await verify(b.apiKey, claimB.body.data.id)
    expect(late.status).toBe(409)
    expect(late.body.errors[0].code).toBe("CONFLICT")
  })

  it("keeps other accounts out (403) and answers 404 for unknown ids", async () => {
    const { domain } = await verifiedDomain()
    const stranger = await createAccount(app.api)
    for (const [method, path] of [["POST", `/api/inbound/domains/${domain.id}/verify`], ["DELETE", `/api/inbound/domains/${domain.id}`]]) {
      const r = await app.api.call(method!, path!, { token: stranger.apiKey })
      expect(r.status).toBe(403)
      expect(r.body.errors[0].code).toBe("FORBIDDEN")
      expect(JSON.stringify(r.body)).not.toContain("mail-verify")
    }
    expect((await verify(stranger.apiKey, 99999999)).status).toBe(404)
    expect((await app.api.call("GET", "/api/inbound/domains", { token: stranger.apiKey })).body.data).toEqual([])
    const reader = await createAccount(app.api, { scopes: "inbound:read" })
    expect((await add(reader.apiKey, unique("ro"))).status).toBe(403)
  })
})

describe("mail on a receiving domain", () => {
  it("routes mail for its addresses in any case, and refuses deleting the domain while addresses use it", async () => {
    const { userId, apiKey, domain } = await verifiedDomain()
    const address = await createAddress(app.api, apiKey, "info", { domain_id: domain.id })
    expect(address).toMatchObject({ domain_id: domain.id, email: `info@${domain.domain}` })
    // Taken on the platform domain by someone else does not matter on a customer's own domain.
    const sent = await sendRaw(app.mx, { from: "a@sender.example", to: [`Info@${domain.domain.toUpperCase()}`], raw: plainMessage() })
    expect(sent.data?.code).toBe(250)
    expect(await countMessages(app.api, userId)).toBe(1)
    expect((await sendRaw(app.mx, { from: "a@sender.example", to: [`sales@${domain.domain}`], raw: plainMessage() })).rcpts[0]!.code).toBe(550)

    const blocked = await app.api.call("DELETE", `/api/inbound/domains/${domain.id}`, { token: apiKey })
    expect(blocked.status).toBe(409)
    expect(blocked.body.errors[0].code).toBe("CONFLICT")
    expect((await app.api.call("DELETE", `/api/inbound/addresses/${address.id}`, { token: apiKey })).status).toBe(200)
    expect((await app.api.call("DELETE", `/api/inbound/domains/${domain.id}`, { token: apiKey })).status).toBe(200)
    expect((await app.api.call("GET", "/api/inbound/domains", { token: apiKey })).body.data).toEqual([])
    expect((await sendRaw(app.mx, { from: "a@sender.example", to: [`info@${domain.domain}`], raw: plainMessage() })).rcpts[0]!.code).toBe(550)
  })

  it("suspends a domain whose records vanish (mail deferred 451 4.4.3) and restores it when they return", async () => {
    const { userId, apiKey, domain } = await verifiedDomain()
    const address = await createAddress(app.api, apiKey, "orders", { domain_id: domain.id })
    const txt = domain.verification_record.value

    expect(await recheck("10 minutes")).toBe(0) // not due yet
    app.dns.remove(domain.domain, "TXT")
    expect(await recheck()).toBeGreaterThanOrEqual(1)
    const listed = await app.api.call("GET", "/api/inbound/domains", { token: apiKey })
    expect(listed.body.data[0].status).toBe("suspended")
    const deferred = await sendRaw(app.mx, { from: "a@sender.example", to: [address.email], raw: plainMessage() })
    expect(deferred.rcpts[0]!.code).toBe(451)
    expect(deferred.rcpts[0]!.text).toMatch(/^4\.4\.3 /)
    const refused = await app.api.call("POST", "/api/inbound/addresses", { token: apiKey, body: { local_part: "new", domain_id: domain.id } })
    expect(refused.status).toBe(403)

    app.dns.set(domain.domain, "TXT", [txt])
    await recheck("4 hours") // the next check falls due an interval after the last one
    expect((await app.api.call("GET", "/api/inbound/domains", { token: apiKey })).body.data[0].status).toBe("verified")
    const delivered = await sendRaw(app.mx, { from: "a@sender.example", to: [address.email], raw: plainMessage() })
    expect(delivered.data?.code).toBe(250)
    expect(await countMessages(app.api, userId)).toBe(1)
  })

  it("keeps a verified domain verified while DNS is merely failing", async () => {
    const { apiKey, domain } = await verifiedDomain()
    app.dns.fail(domain.domain)
    const before = app.dns.queries()
    await recheck()
    expect(app.dns.queries()).toBeGreaterThan(before)
    const [row] = await query<{ status: string; last_checked_at: Date }>(app.api, "SELECT status, last_checked_at FROM receiving_domains WHERE id = $1", [domain.id])
    expect(row!.status).toBe("verified")
    expect(row!.last_checked_at.getTime()).toBeGreaterThan(Date.now() + 60 * 60 * 1000)
    expect((await app.api.call("GET", "/api/inbound/domains", { token: apiKey })).body.data[0].status).toBe("verified")
    app.dns.fail(domain.domain, false)
  })
})
