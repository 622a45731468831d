/**
 * Sending domains over HTTP: creation (DKIM key, three records), verification by real DNS
 * lookups on a loopback server, limits, conflicts, ownership and scopes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { addDomain, publish, query, type SendingTestApp, startSendingApp, unique, verifiedDomain, verify } from "./support.ts"

let app: SendingTestApp
beforeAll(async () => {
  app = await startSendingApp()
})
afterAll(() => app.stop())

const post = (apiKey: string, body: unknown, path = "/api/domains") => app.api.call("POST", path, { token: apiKey, body })

describe("POST /api/domains", () => {
  it("adds a pending domain with a fresh RSA 2048 DKIM key and answers the three TXT records", async () => {
    const { apiKey } = await createAccount(app.api)
    const name = unique("Duka")
    const r = await post(apiKey, { domain: ` ${name.toUpperCase()}. ` }, "/api/domains/")
    expect(r.status).toBe(201)
    expect(r.body.success).toBe(true)
    const { domain, dns_records } = r.body.data
    expect(dns_records).toEqual([
      { type: "TXT", host: `mail._domainkey.${name.toLowerCase()}`, value: expect.stringMatching(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/) },
      { type: "TXT", host: name.toLowerCase(), value: "v=spf1 ip4:127.0.0.1 -all" },
      {
        type: "TXT",
        host: `_dmarc.${name.toLowerCase()}`,
        value: "v=DMARC1; p=quarantine; sp=quarantine; rua=mailto:dmarc@inbox.localhost; adkim=s; aspf=s",
      },
    ])
    expect(domain).toEqual({
      id: expect.any(Number),
      domain: name.toLowerCase(),
      purpose: "sending",
      status: "pending",
      from_local_part: "noreply",
      verified_at: null,
      created_at: expect.stringMatching(/Z$/),
      dns_records,
    })

    // p= is an RSA 2048 SubjectPublicKeyInfo that Web Crypto imports.
    const p = dns_records[0].value.split("p=")[1]
    const key = await crypto.subtle.importKey("spki", Buffer.from(p, "base64"), { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, true, ["verify"])
    expect((key.algorithm as RsaHashedKeyAlgorithm).modulusLength).toBe(2048)

    // The private key is stored sealed and never leaves the server.
    const [row] = await query<{ dkim_private_key_sealed: string }>(app, "SELECT dkim_private_key_sealed FROM sending_domains WHERE id = $1", [domain.id])
    expect(row!.dkim_private_key_sealed).toMatch(/^v1\.[A-Za-z0-9_-]+$/)
    expect(JSON.stringify(r.body)).not.toMatch(/PRIVATE|sealed/i)

    const list = await app.api.call("GET", "/api/domains/", { token: apiKey })
    expect(list.status).toBe(200)
    expect(list.body.data).toEqual([domain])
    expect((await app.api.call("GET", "/api/domains", { token: apiKey })).body.data).toEqual([domain])
  })

  it("takes a custom default local part and gives every domain its own key", async () => {
    const { apiKey } = await createAccount(app.api)
    const a = await addDomain(app, apiKey, { domain: unique("a"), from_local_part: "hello-2" })
    const b = await addDomain(app, apiKey, { domain: unique("b") })
    expect(a.domain.from_local_part).toBe("hello-2")
    expect(a.dns_records[0]!.value).not.toBe(b.dns_records[0]!.value)
  })

  it("refuses malformed names, the platform's domain and bad local parts with 400", async () => {
    const { apiKey } = await createAccount(app.api)
    for (const domain of ["localhost", "-bad.co.tz", "a..b.tz", "exa mple.com", "", 42, null, "inbox.localhost", "mail.inbox.localhost", "mx.inbox.localhost"]) {
      const r = await post(apiKey, { domain })
      expect(r.status, String(domain)).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field: "domain", code: "VALIDATION_ERROR" })
    }
    expect((await post(apiKey, {})).body.errors[0]).toMatchObject({ field: "domain", code: "VALIDATION_ERROR" })
    for (const from_local_part of ["No-Reply", "no_reply", "", "x".repeat(65), 7]) {
      const r = await post(apiKey, { domain: unique("lp"), from_local_part })
      expect(r.status, String(from_local_part)).toBe(400)
      expect(r.body.errors[0]).toMatchObject({ field: "from_local_part", code: "VALIDATION_ERROR" })
    }
    expect((await app.api.call("GET", "/api/domains", { token: apiKey })).body.data).toEqual([])
  })

  it("answers 409 CONFLICT for a domain the account already added; other accounts may claim it", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const name = unique("twice")
    await addDomain(app, a.apiKey, { domain: name })
    const again = await post(a.apiKey, { domain: name.toUpperCase() })
    expect(again.status).toBe(409)
    expect(again.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "domain" })
    expect((await post(b.apiKey, { domain: name })).status).toBe(201)
  })

  it("caps an account at 5 sending domains (409 LIMIT_REACHED), even when created at once", async () => {
    const { apiKey } = await createAccount(app.api)
    const results = await Promise.all(Array.from({ length: 7 }, (_, i) => post(apiKey, { domain: unique(`cap${i}`) })))
    expect(results.filter((r) => r.status === 201)).toHaveLength(5)
    expect(results.filter((r) => r.status === 409).map((r) => r.body.errors[0].code)).toEqual(["LIMIT_REACHED", "LIMIT_REACHED"])
    expect((await app.api.call("GET", "/api/domains", { token: apiKey })).body.data).toHaveLength(5)
  })
})

describe("POST /api/domains/:id/verify", () => {
  it("stays pending until DKIM, SPF and DMARC are all published, without saying which is missing", async () => {
    const { apiKey } = await createAccount(app.api)
    const { domain, dns_records } = await addDomain(app, apiKey, { domain: unique("pole") })
    const [dkim, spf, dmarc] = dns_records

    const before = app.dns.queries()
    for (const published of [[], [dkim!], [dkim!, spf!], [spf!, dmarc!], [dkim!, dmarc!]]) {
      for (const r of dns_records) app.dns.remove(r.host, "TXT")
      publish(app, published)
      const r = await verify(app, apiKey, domain.id)
      expect(r.status).toBe(200)
      expect(r.body.success).toBe(true)
      expect(r.body.data).toMatchObject({ id: domain.id, status: "pending", verified_at: null })
      expect(JSON.stringify({ message: r.body.message, errors: r.body.errors })).not.toMatch(/DKIM|SPF|DMARC/i)
    }
    expect(app.dns.queries() - before).toBeGreaterThanOrEqual(15) // three real lookups per verify

    publish(app, dns_records)
    const done = await verify(app, apiKey, domain.id)
    expect(done.status).toBe(200)
    expect(done.body.message).toBe("domain verified")
    expect(done.body.data).toMatchObject({ status: "verified", verified_at: expect.stringMatching(/Z$/) })
    expect((await verify(app, apiKey, domain.id)).body.data.verified_at).toBe(done.body.data.verified_at)
    expect((await app.api.call("GET", "/api/domains", { token: apiKey })).body.data[0].status).toBe("verified")
  })

  it("needs the DKIM key in full, an SPF ending -all and a DMARC policy of quarantine or reject", async () => {
    const { apiKey } = await createAccount(app.api)
    const { domain, dns_records } = await addDomain(app, apiKey, { domain: unique("strict") })
    const [dkim, spf, dmarc] = dns_records
    const key = dkim!.value.split("p=")[1]!
    publish(app, dns_records)
    // SPF is evaluated as receivers do: `mx` passes when the domain's MX is our mail server, and
    // include: chains and ip4 ranges are followed.
    app.dns.set(domain.domain, "MX", ["10 mx.inbox.localhost"])
    app.dns.set("mx.inbox.localhost", "A", ["127.0.0.1"])
    app.dns.set(`_spf.${domain.domain}`, "TXT", ["v=spf1 include:_spf2.provider.example -all"])
    app.dns.set("_spf2.provider.example", "TXT", ["v=spf1 ip4:127.0.0.0/8 -all"])
    app.dns.set("_spf3.provider.example", "TXT", ["v=spf1 ip4:10.0.0.0/8 -all"])
    const attempts: Array<[string, string, boolean]> = [
      [dkim!.host, dkim!.value.slice(0, -4), false], // truncated key
      [dkim!.host, `v=DKIM1; k=rsa; p=${key.slice(0, 100)} ${key.slice(100, 300)}\t${key.slice(300)}`, true], // folded
      [spf!.host, "v=spf1 ip4:127.0.0.1 ~all", false],
      [spf!.host, "v=spf1 ip4:10.9.9.9 -all", false],
      [spf!.host, "v=spf1 mx -all", true],
      [spf!.host, "v=spf1 ip4:127.0.0.0/24 -all", true],
      [spf!.host, "v=spf1 ip4:127.0.1.0/24 -all", false],
      [spf!.host, `v=spf1 include:_spf.${domain.domain} -all`, true],
      [spf!.host, "v=spf1 include:_spf3.provider.example -all", false],
      [spf!.host, "v=spf1 include:_spf.nowhere.example -all", false],
      [dmarc!.host, "v=DMARC1; p=none; rua=mailto:x@example.net", false],
      [dmarc!.host, "v=DMARC1; p=reject", true],
    ]
    for (const [host, value, verifies] of attempts) {
      publish(app, dns_records)
      app.dns.set(host, "TXT", [value])
      const r = await verify(app, apiKey, domain.id)
      expect(r.body.data.status, value).toBe(verifies ? "verified" : "pending")
      if (verifies) await query(app, "UPDATE sending_domains SET status = 'pending', verified_at = NULL WHERE id = $1", [domain.id])
    }
  })

  it("lets only one account hold a verified domain (409 CONFLICT for the second)", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const name = unique("contested")
    const claimA = await addDomain(app, a.apiKey, { domain: name })
    const claimB = await addDomain(app, b.apiKey, { domain: name })
    publish(app, claimA.dns_records)
    expect((await verify(app, a.apiKey, claimA.domain.id)).body.data.status).toBe("verified")
    expect((await verify(app, b.apiKey, claimB.domain.id)).body.data.status).toBe("pending")
    publish(app, claimB.dns_records)
    const late = await verify(app, b.apiKey, claimB.domain.id)
    expect(late.status).toBe(409)
    expect(late.body.errors[0].code).toBe("CONFLICT")
  })
})

describe("ownership and scopes", () => {
  it("answers 403 for another account's domain, 404 for unknown ids, and never shows it", async () => {
    const { domain } = await verifiedDomain(app)
    const stranger = await createAccount(app.api)
    for (
      const [method, path, body] of [
        ["POST", `/api/domains/${domain.id}/verify`, undefined],
        ["DELETE", `/api/domains/${domain.id}`, undefined],
        ["POST", `/api/domains/${domain.id}/senders`, { local_part: "sales" }],
      ] as const
    ) {
      const r = await app.api.call(method, path, { token: stranger.apiKey, body })
      expect(r.status, path).toBe(403)
      expect(r.body.errors[0].code).toBe("FORBIDDEN")
      expect(JSON.stringify(r.body)).not.toContain(domain.domain)
      const missing = await app.api.call(method, path.replace(String(domain.id), "99999999"), { token: stranger.apiKey, body })
      expect(missing.status, path).toBe(404)
      expect(missing.body.errors[0].code).toBe("NOT_FOUND")
    }
    expect((await app.api.call("GET", "/api/domains", { token: stranger.apiKey })).body.data).toEqual([])
    expect((await app.api.call("GET", "/api/domains/senders", { token: stranger.apiKey })).body.data).toEqual([])
    expect((await app.api.call("POST", "/api/domains/abc/verify", { token: stranger.apiKey })).status).toBe(400)
  })

  it("needs the `domains` scope (403) and credentials (401)", async () => {
    const reader = await createAccount(app.api, { scopes: "inbound:read,outbound:send" })
    for (const [method, path] of [["GET", "/api/domains"], ["POST", "/api/domains"], ["GET", "/api/domains/senders"], ["POST", "/api/domains/1/verify"]]) {
      const r = await app.api.call(method!, path!, { token: reader.apiKey, ...(method === "POST" ? { body: { domain: unique("scope") } } : {}) })
      expect(r.status, path).toBe(403)
      expect(r.body.errors[0].code).toBe("FORBIDDEN")
      expect((await app.api.call(method!, path!)).status).toBe(401)
    }
    const scoped = await createAccount(app.api, { scopes: "domains" })
    expect((await post(scoped.apiKey, { domain: unique("scoped") })).status).toBe(201)
    // A JWT acts with full scope (DECISIONS.md "Authentication").
    expect((await app.api.call("GET", "/api/domains", { token: scoped.token })).body.data).toHaveLength(1)
  })
})

describe("DELETE /api/domains/:id", () => {
  it("deletes the domain with its senders", async () => {
    const { apiKey, userId, domain } = await verifiedDomain(app)
    expect((await app.api.call("POST", `/api/domains/${domain.id}/senders`, { token: apiKey, body: { local_part: "sales" } })).status).toBe(201)
    const r = await app.api.call("DELETE", `/api/domains/${domain.id}`, { token: apiKey })
    expect(r.status).toBe(200)
    expect(r.body.data).toEqual({ deleted_domain_id: domain.id })
    expect((await app.api.call("GET", "/api/domains", { token: apiKey })).body.data).toEqual([])
    expect((await app.api.call("GET", "/api/domains/senders", { token: apiKey })).body.data).toEqual([])
    expect(await query(app, "SELECT id FROM sender_addresses WHERE user_id = $1", [userId])).toEqual([])
    expect((await app.api.call("DELETE", `/api/domains/${domain.id}`, { token: apiKey })).status).toBe(404)
    // The name is free again for the account.
    expect((await post(apiKey, { domain: domain.domain })).status).toBe(201)
  })
})
