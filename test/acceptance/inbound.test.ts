/**
 * Acceptance: SPEC.md "Inbound addresses", "Inbound messages", "Receiving domains", "Compliance"
 * and the MX, with DECISIONS.md's shapes and codes (5 TZS per recipient address, 452 at zero
 * balance, 550 for unknown recipients, PENDING as HTTP 200, 409 CONFLICT / reserved local parts).
 * Mail goes in through a real SMTP client on SMTP_PORT; DNS answers come from a real DNS server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { sendRaw } from "../support/smtp-client.ts"
import {
  type AuthTestApp,
  balanceVia,
  createKeyVia,
  creditVia,
  expectError,
  expectLedgerMatches,
  expectOk,
  onboard,
  type Onboarded,
  registerVia,
  RFC3339_Z,
  startService,
} from "./support.ts"

let t: AuthTestApp
let dns: TestDnsServer
beforeAll(async () => {
  dns = await startDnsServer(zoneFixture("platform.json"))
  t = await startService({ settings: { dnsServers: [dns.address] } })
})
afterAll(async () => {
  await t.api.stop()
  await dns.close()
})

const call = (method: string, path: string, key: string, body?: unknown) => t.api.call(method, path, { token: key, ...(body === undefined ? {} : { body }) })
let seq = 0
const lp = (p = "box") => `${p}-${process.pid}-${++seq}`

export const ADDRESS_FIELDS = ["created_at", "domain_id", "id", "label", "local_part", "retention_days", "user_id"]
export const MESSAGE_FIELDS = ["address_id", "attachments", "from_addr", "headers", "html_body", "id", "is_read", "received_at", "subject", "text_body", "to_addr"]

const createAddress = async (acc: Onboarded, local_part: string, extra: Record<string, unknown> = {}) =>
  expectOk(await call("POST", "/api/inbound/addresses", acc.key, { local_part, ...extra }), 201) as Record<string, any>

const mime = (to: string, subject: string, withAttachment = false) =>
  [
    "From: Alice <alice@sender.example>",
    `To: ${to}`,
    `Subject: ${subject}`,
    `Message-ID: <acc-${Math.random().toString(16).slice(2)}@sender.example>`,
    "Date: Sun, 22 Nov 2026 08:00:00 +0300",
    "MIME-Version: 1.0",
    ...(withAttachment
      ? [
        'Content-Type: multipart/mixed; boundary="b1"',
        "",
        "--b1",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "Habari, see attached.",
        "--b1",
        'Content-Type: text/plain; name="note.txt"',
        'Content-Disposition: attachment; filename="note.txt"',
        "Content-Transfer-Encoding: base64",
        "",
        Buffer.from("hello attachment").toString("base64"),
        "--b1--",
      ]
      : ["Content-Type: text/plain; charset=utf-8", "", "Habari! This is a test."]),
    "",
  ].join("\r\n")

const deliver = (to: ReadonlyArray<string>, subject = "Hello", withAttachment = false) =>
  sendRaw(t.api.ports.mx!, { from: "alice@sender.example", to, raw: mime(to[0]!, subject, withAttachment) })

describe("inbound addresses", () => {
  it("POST answers 201 with the InboundAddress; GET lists it; retention defaults to 30", async () => {
    const acc = await onboard(t)
    const local = lp()
    const a = await createAddress(acc, local, { label: "Support" })
    for (const f of ADDRESS_FIELDS) expect(a, f).toHaveProperty(f)
    expect(a).toMatchObject({ local_part: local, label: "Support", domain_id: null, retention_days: 30, user_id: acc.user.id })
    expect(Number.isInteger(a.id)).toBe(true)
    expect(a.created_at).toMatch(RFC3339_Z)
    const list = expectOk(await call("GET", "/api/inbound/addresses", acc.key)) as Array<Record<string, any>>
    expect(list.map((x) => x.id)).toEqual([a.id])
    for (const f of ADDRESS_FIELDS) expect(list[0], f).toHaveProperty(f)
  })

  it("400 VALIDATION_ERROR with field local_part for Info, a_b, empty, 65 chars", async () => {
    const acc = await onboard(t)
    for (const bad of ["Info", "a_b", "", "a".repeat(65), "a.b"]) {
      expectError(await call("POST", "/api/inbound/addresses", acc.key, { local_part: bad }), 400, "VALIDATION_ERROR", "local_part")
    }
    expectError(await call("POST", "/api/inbound/addresses", acc.key, {}), 400, "VALIDATION_ERROR", "local_part")
  })

  it("409 CONFLICT for a duplicate (across accounts) and for reserved local parts", async () => {
    const a = await onboard(t)
    const b = await onboard(t)
    const local = lp()
    await createAddress(a, local)
    expectError(await call("POST", "/api/inbound/addresses", a.key, { local_part: local }), 409, "CONFLICT")
    expectError(await call("POST", "/api/inbound/addresses", b.key, { local_part: local }), 409, "CONFLICT")
    for (const r of ["postmaster", "abuse", "hostmaster", "webmaster", "mailer-daemon", "root"]) {
      expectError(await call("POST", "/api/inbound/addresses", a.key, { local_part: r }), 409, "CONFLICT")
    }
  })

  it("403 FORBIDDEN for an unverified identity; 403 for a key without inbound:write", async () => {
    const s = await registerVia(t)
    const k = await createKeyVia(t, s.token)
    expectError(await call("POST", "/api/inbound/addresses", k.key, { local_part: lp() }), 403, "FORBIDDEN")
    const ro = await onboard(t, { scopes: "inbound:read" })
    expectError(await call("POST", "/api/inbound/addresses", ro.key, { local_part: lp() }), 403, "FORBIDDEN")
    expectOk(await call("GET", "/api/inbound/addresses", ro.key))
  })

  it("409 LIMIT_REACHED at the 101st address; X-API-Key header works like Bearer", async () => {
    const acc = await onboard(t)
    for (let i = 0; i < 100; i++) await createAddress(acc, lp("lim"))
    expectError(await call("POST", "/api/inbound/addresses", acc.key, { local_part: lp("lim") }), 409, "LIMIT_REACHED")
    const viaHeader = await t.api.call("GET", "/api/inbound/addresses", { headers: { "x-api-key": acc.key } })
    expect(expectOk(viaHeader)).toHaveLength(100)
  })

  it("DELETE: 403 for another account's address, 404 for a missing one, 200 for one's own", async () => {
    const a = await onboard(t)
    const b = await onboard(t)
    const addr = await createAddress(a, lp())
    expectError(await call("DELETE", `/api/inbound/addresses/${addr.id}`, b.key), 403, "FORBIDDEN")
    expectError(await call("DELETE", "/api/inbound/addresses/99999999", a.key), 404, "NOT_FOUND")
    expectOk(await call("DELETE", `/api/inbound/addresses/${addr.id}`, a.key))
    expect(expectOk(await call("GET", "/api/inbound/addresses", a.key))).toEqual([])
  })
})

describe("MX and inbound messages", () => {
  it("accepts mail (250), stores it, debits 5 TZS per recipient address; list newest first with pagination", async () => {
    const acc = await onboard(t)
    await creditVia(t, acc.user.id, 100)
    const a1 = await createAddress(acc, lp())
    const a2 = await createAddress(acc, lp())
    const to1 = `${a1.local_part}@inbox.localhost`
    const to2 = `${a2.local_part}@inbox.localhost`
    const first = await deliver([to1], "first")
    expect(first.rcpts[0]!.code).toBe(250)
    expect(first.data!.code).toBe(250)
    const both = await deliver([to1, to2], "second", true)
    expect(both.rcpts.map((r) => r.code)).toEqual([250, 250])
    expect(both.data!.code).toBe(250)
    expect(await balanceVia(t, acc.key)).toBe(100 - 15)
    await expectLedgerMatches(t, acc.key)

    const res = await call("GET", `/api/inbound/messages?address_id=${a1.id}`, acc.key)
    const list = expectOk(res) as Array<Record<string, any>>
    expect(res.body.pagination).toEqual({ page: 1, per_page: 20, total: 2, total_pages: 1 })
    expect(list.map((m) => m.subject)).toEqual(["second", "first"])
    for (const f of MESSAGE_FIELDS) expect(list[0], f).toHaveProperty(f)
    const page2 = await call("GET", `/api/inbound/messages?address_id=${a1.id}&per_page=1&page=2`, acc.key)
    expect((expectOk(page2) as Array<any>).map((m) => m.subject)).toEqual(["first"])
    expect(page2.body.pagination).toEqual({ page: 2, per_page: 1, total: 2, total_pages: 2 })

    const m = expectOk(await call("GET", `/api/inbound/messages/${list[0]!.id}`, acc.key)) as Record<string, any>
    for (const f of MESSAGE_FIELDS) expect(m, f).toHaveProperty(f)
    expect(m).toMatchObject({ address_id: a1.id, subject: "second", is_read: false })
    expect(m.from_addr).toContain("alice@sender.example")
    expect(m.to_addr).toContain(to1)
    expect(m.text_body).toContain("see attached")
    expect(typeof m.headers).toBe("object")
    expect(m.received_at).toMatch(RFC3339_Z)
    expect(m.attachments).toHaveLength(1)
    expect(Object.keys(m.attachments[0]).sort()).toEqual(expect.arrayContaining(["content", "content_type", "filename", "size"]))
    expect(m.attachments[0]).toMatchObject({ filename: "note.txt", size: 16 })
    expect(m.attachments[0].content_type).toMatch(/^text\/plain/)
    expect(Buffer.from(m.attachments[0].content, "base64").toString()).toBe("hello attachment")

    // read + unread filter
    expectOk(await call("PATCH", `/api/inbound/messages/${m.id}/read`, acc.key))
    expect((expectOk(await call("GET", `/api/inbound/messages/${m.id}`, acc.key)) as any).is_read).toBe(true)
    const unread = expectOk(await call("GET", `/api/inbound/messages?address_id=${a1.id}&unread=true`, acc.key)) as Array<any>
    expect(unread.map((x) => x.subject)).toEqual(["first"])

    // another account: 403, missing: 404; paging bounds
    const other = await onboard(t)
    expectError(await call("GET", `/api/inbound/messages/${m.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("PATCH", `/api/inbound/messages/${m.id}/read`, other.key), 403, "FORBIDDEN")
    expectError(await call("GET", `/api/inbound/messages?address_id=${a1.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("GET", "/api/inbound/messages/99999999", acc.key), 404, "NOT_FOUND")
    expectError(await call("GET", `/api/inbound/messages?address_id=${a1.id}&per_page=101`, acc.key), 400, "VALIDATION_ERROR")
    expectError(await call("GET", `/api/inbound/messages?address_id=${a1.id}&page=0`, acc.key), 400, "VALIDATION_ERROR")
    expectError(await call("GET", "/api/inbound/messages", acc.key), 400, "VALIDATION_ERROR", "address_id")

    // deleting the address removes its messages
    expectOk(await call("DELETE", `/api/inbound/addresses/${a1.id}`, acc.key))
    expectError(await call("GET", `/api/inbound/messages/${m.id}`, acc.key), 404, "NOT_FOUND")
    const gone = await deliver([to1], "after delete")
    expect(gone.rcpts[0]!.code).toBe(550)
  })

  it("unknown recipient: 550; zero balance: 452 and nothing stored or charged", async () => {
    const unknown = await deliver([`nobody-${lp()}@inbox.localhost`])
    expect(unknown.rcpts[0]!.code).toBe(550)
    const acc = await onboard(t)
    const a = await createAddress(acc, lp())
    const r = await deliver([`${a.local_part}@inbox.localhost`])
    expect(r.rcpts[0]!.code).toBe(452)
    expect(r.data).toBeUndefined()
    expect(expectOk(await call("GET", `/api/inbound/messages?address_id=${a.id}`, acc.key))).toEqual([])
    expect(await balanceVia(t, acc.key)).toBe(0)
  })
})

describe("receiving domains", () => {
  it("add (201) → PENDING (200, success false, data) → DNS published → verified; addresses on it; 409 on delete", async () => {
    const acc = await onboard(t)
    const domain = `rx-${process.pid}-${++seq}.example.co.tz`
    const res = await call("POST", "/api/inbound/domains", acc.key, { domain })
    const d = expectOk(res, 201) as Record<string, any>
    expect(d.domain).toBe(domain)
    expect(d.verification_record).toMatchObject({ type: "TXT", host: "@" })
    expect(d.verification_record.value).toMatch(/^mail-verify=[0-9a-f]{64}$/)
    const recs = d.verification_records as Array<{ type: string; host: string; value: string }>
    expect(recs).toHaveLength(3)
    expect(recs).toContainEqual(d.verification_record)
    expect(recs).toContainEqual({ type: "MX", host: "@", value: "10 mx.inbox.localhost" })
    expect(recs).toContainEqual({ type: "A", host: "mx.inbox.localhost", value: "127.0.0.1" })
    expect(d).toMatchObject({ status: "pending", verified_at: null })
    expect(Number.isInteger(d.id)).toBe(true)
    expect(d.created_at).toMatch(RFC3339_Z)

    // an address on the unverified domain: 403
    expectError(await call("POST", "/api/inbound/addresses", acc.key, { local_part: "info", domain_id: d.id }), 403, "FORBIDDEN")

    const pending = await call("POST", `/api/inbound/domains/${d.id}/verify`, acc.key)
    expect(pending.status).toBe(200)
    expect(pending.body.success).toBe(false)
    expect(pending.body.errors[0].code).toBe("PENDING")
    expect(pending.body.data).toMatchObject({ id: d.id, domain, status: "pending" })

    const other = await onboard(t)
    expectError(await call("POST", `/api/inbound/domains/${d.id}/verify`, other.key), 403, "FORBIDDEN")
    expectError(await call("DELETE", `/api/inbound/domains/${d.id}`, other.key), 403, "FORBIDDEN")
    expectError(await call("POST", "/api/inbound/domains/99999999/verify", acc.key), 404, "NOT_FOUND")

    dns.set(domain, "TXT", [d.verification_record.value])
    dns.set(domain, "MX", ["10 mx.inbox.localhost"])
    const ok = expectOk(await call("POST", `/api/inbound/domains/${d.id}/verify`, acc.key)) as Record<string, any>
    expect(ok).toMatchObject({ id: d.id, status: "verified" })
    expect(ok.verified_at).toMatch(RFC3339_Z)
    const list = expectOk(await call("GET", "/api/inbound/domains", acc.key)) as Array<Record<string, any>>
    expect(list.map((x) => x.id)).toEqual([d.id])

    const addr = await createAddress(acc, "info", { domain_id: d.id })
    expect(addr.domain_id).toBe(d.id)
    await creditVia(t, acc.user.id, 10)
    const sent = await deliver([`info@${domain}`])
    expect(sent.data?.code).toBe(250)
    expect(expectOk(await call("GET", `/api/inbound/messages?address_id=${addr.id}`, acc.key))).toHaveLength(1)

    expectError(await call("DELETE", `/api/inbound/domains/${d.id}`, acc.key), 409, "CONFLICT")
    expectOk(await call("DELETE", `/api/inbound/addresses/${addr.id}`, acc.key))
    expectOk(await call("DELETE", `/api/inbound/domains/${d.id}`, acc.key))
    dns.remove(domain)
  })

  it("400 VALIDATION_ERROR with field domain for a bad name; 409 CONFLICT for a duplicate", async () => {
    const acc = await onboard(t)
    expectError(await call("POST", "/api/inbound/domains", acc.key, { domain: "not a domain" }), 400, "VALIDATION_ERROR", "domain")
    expectError(await call("POST", "/api/inbound/domains", acc.key, {}), 400, "VALIDATION_ERROR", "domain")
    const domain = `dup-${process.pid}-${++seq}.example.co.tz`
    expectOk(await call("POST", "/api/inbound/domains", acc.key, { domain }), 201)
    expectError(await call("POST", "/api/inbound/domains", acc.key, { domain }), 409, "CONFLICT")
  })
})

describe("compliance", () => {
  const PROFILE_FIELDS = ["data_consent_at", "default_retention_days", "id", "pdpc_certificate_number", "pdpc_registered", "pdpc_registered_at", "privacy_policy_version", "updated_at", "user_id"]

  it("profile defaults, PATCH, retention applied to new addresses, audit export fields", async () => {
    const acc = await onboard(t)
    const p = expectOk(await call("GET", "/api/compliance/profile", acc.key)) as Record<string, any>
    for (const f of PROFILE_FIELDS) expect(p, f).toHaveProperty(f)
    expect(p).toMatchObject({ pdpc_registered: false, default_retention_days: 30, user_id: acc.user.id, pdpc_registered_at: null })
    const up = expectOk(
      await call("PATCH", "/api/compliance/profile", acc.key, {
        pdpc_registered: true,
        pdpc_certificate_number: "PDPC-123",
        pdpc_registered_at: "2026-01-15",
        default_retention_days: 7,
      }),
    ) as Record<string, any>
    expect(up).toMatchObject({ pdpc_registered: true, pdpc_certificate_number: "PDPC-123", pdpc_registered_at: "2026-01-15", default_retention_days: 7 })
    expectError(await call("PATCH", "/api/compliance/profile", acc.key, { default_retention_days: "x" }), 400, "VALIDATION_ERROR", "default_retention_days")
    expectError(await call("PATCH", "/api/compliance/profile", acc.key, { pdpc_registered_at: "15/01/2026" }), 400, "VALIDATION_ERROR", "pdpc_registered_at")

    const addr = await createAddress(acc, lp())
    expect(addr.retention_days).toBe(7)

    const ex = expectOk(await call("GET", "/api/compliance/audit-export", acc.key)) as Record<string, any>
    expect(Object.keys(ex).sort()).toEqual(
      ["account_id", "address_count", "default_retention_days", "generated_at", "message_count", "pdpc_certificate_number", "pdpc_registered", "pdpc_registered_at"],
    )
    expect(ex).toMatchObject({
      account_id: acc.user.id,
      pdpc_registered: true,
      pdpc_certificate_number: "PDPC-123",
      pdpc_registered_at: "2026-01-15",
      default_retention_days: 7,
      address_count: 1,
      message_count: 0,
    })
    expect(ex.generated_at).toMatch(RFC3339_Z)

    const noScope = await onboard(t, { scopes: "inbound:read" })
    expectError(await call("GET", "/api/compliance/profile", noScope.key), 403, "FORBIDDEN")
  })
})
