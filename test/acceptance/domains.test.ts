/**
 * Acceptance: SPEC.md "Sending domains and sender addresses" and the From rules, with
 * DECISIONS.md's answer `data {domain, dns_records}` (full host names), sender shape
 * `{id, domain_id, local_part, email, created_at}`, 403 for a pending from_domain_id, 400
 * `from_address` for an unknown sender and 409 LIMIT_REACHED at 5 sending domains. Verification
 * runs real DNS lookups against a real DNS server.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OutboundRateLimit } from "../../effects/outbound/limits.ts"
import { ROOMY_RATE } from "../outbound/support.ts"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"
import { type AuthTestApp, creditVia, expectError, expectOk, onboard, type Onboarded, RFC3339_Z, startService } from "./support.ts"

let t: AuthTestApp
let dns: TestDnsServer
beforeAll(async () => {
  dns = await startDnsServer()
  t = await startService({
    settings: { dnsServers: [dns.address] },
    layers: [Layer.succeed(OutboundRateLimit, ROOMY_RATE) as Layer.Layer<never, never, never>],
  })
})
afterAll(async () => {
  await t.api.stop()
  await dns.close()
})

const call = (method: string, path: string, key: string, body?: unknown) => t.api.call(method, path, { token: key, ...(body === undefined ? {} : { body }) })
let seq = 0
const unique = () => `duka-${process.pid}-${++seq}.co.tz`

const DOMAIN_FIELDS = ["created_at", "domain", "from_local_part", "id", "purpose", "status", "verified_at"]
const SENDER_FIELDS = ["created_at", "domain_id", "email", "id", "local_part"]

const addDomain = async (acc: Onboarded, body: Record<string, unknown>) =>
  expectOk(await call("POST", "/api/domains/", acc.key, body), 201) as { domain: Record<string, any>; dns_records: Array<{ type: string; host: string; value: string }> }

describe("sending domains", () => {
  it("add (201) → three TXT records with full hosts → pending → published → verified; senders; sending from it", async () => {
    const acc = await onboard(t)
    await creditVia(t, acc.user.id, 100)
    const name = unique()
    const created = await addDomain(acc, { domain: name })
    expect(Object.keys(created).sort()).toEqual(["dns_records", "domain"])
    for (const f of DOMAIN_FIELDS) expect(created.domain, f).toHaveProperty(f)
    expect(created.domain).toMatchObject({ domain: name, purpose: "sending", status: "pending", from_local_part: "noreply", verified_at: null })
    expect(created.domain.created_at).toMatch(RFC3339_Z)
    const recs = created.dns_records
    expect(recs).toHaveLength(3)
    for (const r of recs) expect(Object.keys(r).sort()).toEqual(["host", "type", "value"])
    expect(recs.every((r) => r.type === "TXT")).toBe(true)
    const dkim = recs.find((r) => r.host === `mail._domainkey.${name}`)!
    const spf = recs.find((r) => r.host === name)!
    const dmarc = recs.find((r) => r.host === `_dmarc.${name}`)!
    expect(dkim.value).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/)
    expect(spf.value).toMatch(/^v=spf1 (ip4:127\.0\.0\.1|mx)( .*)? -all$/)
    expect(dmarc.value).toMatch(/^v=DMARC1; p=quarantine; sp=quarantine; rua=mailto:[^;\s]+@[^;\s]+; adkim=s; aspf=s$/)

    // pending: 200 with status pending; sending from it: 403
    const pending = expectOk(await call("POST", `/api/domains/${created.domain.id}/verify`, acc.key)) as Record<string, any>
    expect(pending.status).toBe("pending")
    expectError(
      await call("POST", "/api/outbound/emails", acc.key, { to: ["x@customer.example"], subject: "s", text_body: "b", from_domain_id: created.domain.id }),
      403,
      "FORBIDDEN",
    )

    // a partial publication stays pending
    dns.set(dkim.host, "TXT", [dkim.value])
    dns.set(spf.host, "TXT", [spf.value])
    expect((expectOk(await call("POST", `/api/domains/${created.domain.id}/verify`, acc.key)) as any).status).toBe("pending")
    dns.set(dmarc.host, "TXT", [dmarc.value])
    const v = expectOk(await call("POST", `/api/domains/${created.domain.id}/verify`, acc.key)) as Record<string, any>
    expect(v).toMatchObject({ id: created.domain.id, status: "verified" })
    expect(v.verified_at).toMatch(RFC3339_Z)
    const list = expectOk(await call("GET", "/api/domains/", acc.key)) as Array<Record<string, any>>
    expect(list.map((d) => [d.id, d.status])).toEqual([[created.domain.id, "verified"]])

    // senders: the default local part is listed; a new one answers 201 with the documented shape
    const before = expectOk(await call("GET", "/api/domains/senders", acc.key)) as Array<Record<string, any>>
    expect(before.map((s) => s.email)).toEqual([`noreply@${name}`])
    const s = expectOk(await call("POST", `/api/domains/${created.domain.id}/senders`, acc.key, { local_part: "billing" }), 201) as Record<string, any>
    expect(Object.keys(s).sort()).toEqual(SENDER_FIELDS)
    expect(s).toMatchObject({ domain_id: created.domain.id, local_part: "billing", email: `billing@${name}` })
    expect(s.created_at).toMatch(RFC3339_Z)
    for (const bad of ["Billing", "a_b"]) {
      expectError(await call("POST", `/api/domains/${created.domain.id}/senders`, acc.key, { local_part: bad }), 400, "VALIDATION_ERROR", "local_part")
    }
    expectError(await call("POST", `/api/domains/${created.domain.id}/senders`, acc.key, { local_part: "billing" }), 409, "CONFLICT")

    // From rules with from_domain_id
    const send = (body: Record<string, unknown>) =>
      call("POST", "/api/outbound/emails", acc.key, { to: ["x@customer.example"], subject: "s", text_body: "b", from_domain_id: created.domain.id, ...body })
    expect((expectOk(await send({}), 201) as any).from_address).toContain(`noreply@${name}`)
    expect((expectOk(await send({ from_address: `billing@${name}` }), 201) as any).from_address).toContain(`billing@${name}`)
    expectError(await send({ from_address: `ghost@${name}` }), 400, "VALIDATION_ERROR", "from_address")
    expectError(await send({ from_address: "billing@other.example" }), 400, "VALIDATION_ERROR", "from_address")

    // ownership
    const other = await onboard(t)
    expectError(await call("POST", `/api/domains/${created.domain.id}/verify`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", `/api/domains/${created.domain.id}/senders`, other.key, { local_part: "x" }), 403, "FORBIDDEN")
    expectError(await call("DELETE", `/api/domains/senders/${s.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("DELETE", `/api/domains/${created.domain.id}`, other.key), 403, "FORBIDDEN")
    await creditVia(t, other.user.id, 10)
    expectError(
      await call("POST", "/api/outbound/emails", other.key, { to: ["x@customer.example"], subject: "s", text_body: "b", from_domain_id: created.domain.id }),
      403,
      "FORBIDDEN",
    )
    expect(expectOk(await call("GET", "/api/domains/senders", other.key))).toEqual([])
    expectError(await call("DELETE", "/api/domains/99999999", acc.key), 404, "NOT_FOUND")
    expectError(await call("DELETE", "/api/domains/senders/99999999", acc.key), 404, "NOT_FOUND")

    expectOk(await call("DELETE", `/api/domains/senders/${s.id}`, acc.key))
    expect((expectOk(await call("GET", "/api/domains/senders", acc.key)) as Array<any>).map((x) => x.local_part)).toEqual(["noreply"])
    expectOk(await call("DELETE", `/api/domains/${created.domain.id}`, acc.key))
    expect(expectOk(await call("GET", "/api/domains/", acc.key))).toEqual([])
  })

  it("400 for a bad domain or from_local_part; 409 CONFLICT for a duplicate; 409 LIMIT_REACHED at the 6th; 403 without the domains scope", async () => {
    const acc = await onboard(t)
    expectError(await call("POST", "/api/domains/", acc.key, { domain: "not a domain" }), 400, "VALIDATION_ERROR", "domain")
    expectError(await call("POST", "/api/domains/", acc.key, {}), 400, "VALIDATION_ERROR", "domain")
    expectError(await call("POST", "/api/domains/", acc.key, { domain: unique(), from_local_part: "No_Reply" }), 400, "VALIDATION_ERROR", "from_local_part")
    const first = await addDomain(acc, { domain: unique(), from_local_part: "hello" })
    expect(first.domain.from_local_part).toBe("hello")
    expectError(await call("POST", "/api/domains/", acc.key, { domain: first.domain.domain }), 409, "CONFLICT")
    for (let i = 0; i < 4; i++) await addDomain(acc, { domain: unique() })
    expectError(await call("POST", "/api/domains/", acc.key, { domain: unique() }), 409, "LIMIT_REACHED")
    const noScope = await onboard(t, { scopes: "inbound:read" })
    expectError(await call("GET", "/api/domains/", noScope.key), 403, "FORBIDDEN")
  })
})
