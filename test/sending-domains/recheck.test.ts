/**
 * The periodic re-check of sending domains (worker driven step by step under a test clock) and
 * the path outbound takes: a domain created and verified over HTTP yields a sender identity
 * whose DKIM signature verifies against the record published in DNS.
 */
import { Effect, Option } from "effect"
import { dkimVerify } from "mailauth"
import { Resolver } from "node:dns/promises"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SenderIdentities } from "../../effects/sending-domains/identity.ts"
import { query, recheck, type SendingTestApp, startSendingApp, verifiedDomain } from "./support.ts"

let app: SendingTestApp
beforeAll(async () => {
  app = await startSendingApp()
})
afterAll(() => app.stop())

const identity = (userId: number, request: { from_domain_id?: number; from_address?: string }) =>
  app.api.run(Effect.result(SenderIdentities.use((s) => s.senderIdentity(userId, request))))

const status = async (apiKey: string) => (await app.api.call("GET", "/api/domains", { token: apiKey })).body.data[0].status

describe("sending a message from a verified domain", () => {
  it("signs with the domain's key so that receivers verify it against the published record", async () => {
    const { userId, apiKey, domain } = await verifiedDomain(app)
    expect((await app.api.call("POST", `/api/domains/${domain.id}/senders`, { token: apiKey, body: { local_part: "billing" } })).status).toBe(201)
    const result = await identity(userId, { from_domain_id: domain.id, from_address: `billing@${domain.domain}` })
    if (result._tag !== "Success") throw new Error(`expected an identity, got ${JSON.stringify(result)}`)
    expect(result.success).toMatchObject({ from: `billing@${domain.domain}`, domainId: domain.id })

    const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, dkim: Option.getOrThrow(result.success.dkim) })
    const info = await transport.sendMail({ from: result.success.from, to: "a@example.net", subject: "Ankara", text: "Karibu" })
    const resolver = new Resolver()
    resolver.setServers([app.dns.address])
    const verdict = await dkimVerify(info.message as Buffer, {
      resolver: (name: string, type: string) => resolver.resolve(name, type as "TXT") as never,
    })
    expect(verdict.results[0]!.status.result).toBe("pass")
    expect(verdict.results[0]!.signingDomain).toBe(domain.domain)
  })
})

describe("periodic re-check", () => {
  it("suspends a domain whose records vanish (no sending from it) and restores it when they return", async () => {
    const { userId, apiKey, domain } = await verifiedDomain(app)
    const dkim = domain.dns_records[0]!

    expect(await recheck(app, "10 minutes")).toBe(0) // not due yet
    app.dns.remove(dkim.host, "TXT")
    expect(await recheck(app)).toBeGreaterThanOrEqual(1)
    expect(await status(apiKey)).toBe("suspended")
    const refused = await identity(userId, { from_domain_id: domain.id })
    expect(refused._tag === "Failure" && refused.failure._tag).toBe("Forbidden")
    expect((await app.api.call("GET", "/api/domains/senders", { token: apiKey })).body.data).toEqual([])

    app.dns.set(dkim.host, "TXT", [dkim.value])
    await recheck(app, "4 hours") // the next check falls due an interval after the last one
    expect(await status(apiKey)).toBe("verified")
    expect((await identity(userId, { from_domain_id: domain.id }))._tag).toBe("Success")
    const [row] = await query<{ verified_at: Date }>(app, "SELECT verified_at FROM sending_domains WHERE id = $1", [domain.id])
    expect(row!.verified_at.toISOString()).toBe(domain.verified_at) // restored, not verified anew
  })

  it("suspends a domain whose policy was weakened (SPF ~all, DMARC p=none)", async () => {
    for (const weaken of ["spf", "dmarc"] as const) {
      const { apiKey, domain } = await verifiedDomain(app)
      const [, spf, dmarc] = domain.dns_records
      if (weaken === "spf") app.dns.set(spf!.host, "TXT", ["v=spf1 ip4:127.0.0.1 ~all"])
      else app.dns.set(dmarc!.host, "TXT", ["v=DMARC1; p=none"])
      await recheck(app, "6 hours")
      expect(await status(apiKey), weaken).toBe("suspended")
    }
  })

  it("follows the SPF include: an outage of the included name keeps it verified, a provider dropping us suspends it", async () => {
    const account = await verifiedDomain(app)
    const [, spf] = account.domain.dns_records
    const provider = `_spf.${account.domain.domain}`
    app.dns.set(provider, "TXT", ["v=spf1 ip4:127.0.0.0/24 -all"])
    app.dns.set(spf!.host, "TXT", [`v=spf1 include:${provider} -all`])
    await recheck(app, "5 hours")
    expect(await status(account.apiKey)).toBe("verified")
    app.dns.fail(provider)
    await recheck(app, "7 hours")
    expect(await status(account.apiKey)).toBe("verified")
    app.dns.fail(provider, false)
    app.dns.set(provider, "TXT", ["v=spf1 ip4:10.0.0.0/8 -all"])
    await recheck(app, "9 hours")
    expect(await status(account.apiKey)).toBe("suspended")
  })

  it("keeps a verified domain verified while DNS is merely failing", async () => {
    const { userId, apiKey, domain } = await verifiedDomain(app)
    for (const r of domain.dns_records) app.dns.fail(r.host)
    const before = app.dns.queries()
    await recheck(app, "8 hours")
    expect(app.dns.queries()).toBeGreaterThan(before)
    const [row] = await query<{ status: string; last_checked_at: Date; next_check_at: Date }>(
      app,
      "SELECT status, last_checked_at, next_check_at FROM sending_domains WHERE id = $1",
      [domain.id],
    )
    expect(row!.status).toBe("verified")
    expect(row!.last_checked_at.getTime()).toBeGreaterThan(Date.now() + 7 * 60 * 60 * 1000)
    expect(row!.next_check_at.getTime()).toBeGreaterThan(row!.last_checked_at.getTime())
    expect(await status(apiKey)).toBe("verified")
    expect((await identity(userId, { from_domain_id: domain.id }))._tag).toBe("Success")
    for (const r of domain.dns_records) app.dns.fail(r.host, false)
  })

  it("lets POST /verify restore a suspended domain at once, and leaves it suspended while records are still missing", async () => {
    const { apiKey, domain } = await verifiedDomain(app)
    const dmarc = domain.dns_records[2]!
    app.dns.remove(dmarc.host, "TXT")
    await recheck(app, "10 hours")
    expect(await status(apiKey)).toBe("suspended")
    const still = await app.api.call("POST", `/api/domains/${domain.id}/verify`, { token: apiKey })
    expect(still.status).toBe(200)
    expect(still.body.data.status).toBe("suspended")
    app.dns.set(dmarc.host, "TXT", [dmarc.value])
    const back = await app.api.call("POST", `/api/domains/${domain.id}/verify`, { token: apiKey })
    expect(back.body.data).toMatchObject({ status: "verified", verified_at: domain.verified_at })
  })

  it("leaves pending domains to POST /verify", async () => {
    const { domain } = await verifiedDomain(app)
    await query(app, "UPDATE sending_domains SET status = 'pending' WHERE id = $1", [domain.id])
    await recheck(app, "30 hours")
    const [row] = await query<{ status: string }>(app, "SELECT status FROM sending_domains WHERE id = $1", [domain.id])
    expect(row!.status).toBe("pending")
  })
})
