/**
 * Who a message is from (SPEC.md "From rules", through the real SenderIdentities layer): the
 * platform sender and its custom local parts, a verified own domain (its default local part or
 * a recorded sender) whose mail the relay receives DKIM-signed — verified with mailauth against
 * the key the domain published — and the refusals (foreign, pending, suspended domain; unknown
 * sender), each writing nothing.
 */
import { authenticate } from "mailauth"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { TestAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"
import { addDomain, type DnsRecord, publish, type SendingTestApp, unique, verify } from "../sending-domains/support.ts"
import { expectNothingWritten, fundedAccount, makeOutboundApp, query, rcpt, send, startRelay, type TestRelay, verp } from "./support.ts"

let relay: TestRelay
let dns: TestDnsServer
let api: TestApp
let app: SendingTestApp
/** Every TXT record published in the test DNS zone, for mailauth's resolver. */
const published = new Map<string, string>()

beforeAll(async () => {
  relay = await startRelay()
  dns = await startDnsServer()
  api = await makeOutboundApp({ relayUrl: relay.url, settings: { dnsServers: [dns.address] } })
  app = { api, dns, stop: async () => undefined }
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
  await dns?.close()
})
beforeEach(() => relay.reset())

const resolver = async (name: string, rrtype: string) => {
  const value = rrtype === "TXT" ? published.get(name.toLowerCase().replace(/\.$/, "")) : undefined
  if (value === undefined) throw Object.assign(new Error(`no ${rrtype} for ${name}`), { code: "ENOTFOUND" })
  return [[value]]
}

const dkimOf = async (raw: string, from: string) => {
  const result = await authenticate(raw, { ip: "127.0.0.1", helo: "relay.test", sender: from, mta: "mx.dest.example", resolver, disableBimi: true })
  return result.dkim.results
}

const publishAll = (records: ReadonlyArray<DnsRecord>) => {
  publish(app, records)
  for (const r of records) published.set(r.host.toLowerCase(), r.value)
}

/** An account (funded) with a verified sending domain. */
const withVerifiedDomain = async (body: Record<string, unknown> = {}) => {
  const account = await fundedAccount(api, 100)
  const created = await addDomain(app, account.apiKey, { domain: unique("duka"), ...body })
  publishAll(created.dns_records)
  const v = await verify(app, account.apiKey, created.domain.id)
  expect(v.body.data.status).toBe("verified")
  return { account, domain: created.domain }
}

describe("the platform sender", () => {
  it("sends from noreply@ the platform domain, or a chosen local part of it, unsigned", async () => {
    const a = await fundedAccount(api, 100)
    const res = await send(api, a, { to: [rcpt()], subject: "s", text_body: "t", from_address: "Billing@INBOX.localhost" })
    expect(res.status).toBe(201)
    expect(res.body.data.from_address).toBe("billing@inbox.localhost")
    // The envelope sender is the recipient's VERP return path; the From header is the sender.
    expect(relay.received[0]!.from).toBe(verp(api, res.body.data.id, 0))
    expect(relay.received[0]!.raw).toMatch(/^From: billing@inbox\.localhost\r$/m)
    expect(relay.received[0]!.raw).not.toMatch(/^DKIM-Signature:/m)
  })
})

describe("a verified own domain", () => {
  let owner: TestAccount
  let domain: { id: number; domain: string; from_local_part: string }
  beforeAll(async () => {
    const v = await withVerifiedDomain({ from_local_part: "hello" })
    owner = v.account
    domain = v.domain
  })

  it("sends from its default local part, DKIM-signed with the published key (mailauth: pass)", async () => {
    const res = await send(api, owner, { to: [rcpt()], subject: "Signed", text_body: "body", html_body: "<p>body</p>", from_domain_id: domain.id })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const from = `hello@${domain.domain}`
    expect(res.body.data.from_address).toBe(from)
    const got = relay.received[0]!
    expect(got.from).toBe(verp(api, res.body.data.id, 0))
    expect(got.raw).toMatch(new RegExp(`^From: ${from.replace(/\./g, "\\.")}\r$`, "m"))
    expect(got.raw).toMatch(new RegExp(`^DKIM-Signature: .*d=${domain.domain.replace(/\./g, "\\.")};`, "m"))
    const dkim = await dkimOf(got.raw, from)
    expect(dkim).toHaveLength(1)
    expect(dkim[0]).toMatchObject({ signingDomain: domain.domain, selector: "mail", status: { result: "pass" } })
    // The same message altered in transit no longer verifies.
    const tampered = got.raw.replace("<p>body</p>", "<p>b0dy</p>")
    expect((await dkimOf(tampered, from))[0]!.status.result).not.toBe("pass")
    const [row] = await query<{ domain_id: number }>(api, "SELECT domain_id FROM outbound_messages WHERE id = $1", [res.body.data.id])
    expect(row!.domain_id).toBe(domain.id)
  })

  it("sends from a recorded sender; another local part is 400 on from_address, writing nothing", async () => {
    const s = await api.call("POST", `/api/domains/${domain.id}/senders`, { token: owner.apiKey, body: { local_part: "billing" } })
    expect(s.status, JSON.stringify(s.body)).toBe(201)
    const ok = await send(api, owner, { to: [rcpt()], subject: "s", text_body: "t", from_domain_id: domain.id, from_address: `billing@${domain.domain}` })
    expect(ok.status).toBe(201)
    expect((await dkimOf(relay.received[0]!.raw, `billing@${domain.domain}`))[0]!.status.result).toBe("pass")

    const cases: Array<[Record<string, unknown>, number, string | undefined]> = [
      [{ from_domain_id: domain.id, from_address: `sales@${domain.domain}` }, 400, "from_address"],
      [{ from_domain_id: domain.id, from_address: "billing@elsewhere.example" }, 400, "from_address"],
    ]
    for (const [from, status, field] of cases) {
      const before = await query(api, "SELECT count(*)::int8 AS n FROM outbound_messages WHERE user_id = $1", [owner.userId])
      const res = await send(api, owner, { to: [rcpt()], subject: "s", text_body: "t", ...from })
      expect(res.status).toBe(status)
      expect(res.body.errors[0].field).toBe(field)
      expect(await query(api, "SELECT count(*)::int8 AS n FROM outbound_messages WHERE user_id = $1", [owner.userId])).toEqual(before)
    }
  })

  it("another account's domain is 403; pending and suspended domains are 403; nothing written", async () => {
    const stranger = await fundedAccount(api, 100)
    const foreign = await send(api, stranger, { to: [rcpt()], subject: "s", text_body: "t", from_domain_id: domain.id })
    expect(foreign.status).toBe(403)
    await expectNothingWritten(api, stranger.userId)

    const pendingOwner = await fundedAccount(api, 100)
    const pending = await addDomain(app, pendingOwner.apiKey, { domain: unique("pending") })
    const res = await send(api, pendingOwner, { to: [rcpt()], subject: "s", text_body: "t", from_domain_id: pending.domain.id })
    expect(res.status).toBe(403)
    expect(res.body.errors[0].code).toBe("FORBIDDEN")
    await expectNothingWritten(api, pendingOwner.userId)

    const { account, domain: d } = await withVerifiedDomain()
    await query(api, "UPDATE sending_domains SET status = 'suspended' WHERE id = $1", [d.id])
    const suspended = await send(api, account, { to: [rcpt()], subject: "s", text_body: "t", from_domain_id: d.id })
    expect(suspended.status).toBe(403)
    await expectNothingWritten(api, account.userId)
    expect(relay.received).toHaveLength(0)
  })
})

describe("the capture transport (SMTP_RELAY_URL unset)", () => {
  it("keeps the composed message, DKIM signature included, and counts every recipient accepted", async () => {
    const capture = await makeOutboundApp({ settings: { dnsServers: [dns.address] } })
    try {
      const capApp = { api: capture, dns, stop: async () => undefined }
      const owner = await fundedAccount(capture, 100)
      const created = await addDomain(capApp, owner.apiKey, { domain: unique("cap") })
      publish(capApp, created.dns_records)
      for (const r of created.dns_records) published.set(r.host.toLowerCase(), r.value)
      expect((await verify(capApp, owner.apiKey, created.domain.id)).body.data.status).toBe("verified")

      const [to, bcc] = [rcpt(), rcpt()]
      const res = await send(capture, owner, { to: [to], bcc: [bcc], subject: "Captured", text_body: "t", from_domain_id: created.domain.id })
      expect(res.status).toBe(201)
      expect(res.body.data).toMatchObject({ status: "sent", amount_tzs: 10 })
      const [row] = await query<
        { envelope_from: string; envelope_to: Array<string>; return_paths: Array<string>; raw: Uint8Array; size_bytes: number; message_id: number }
      >(
        capture,
        "SELECT * FROM outbound_captures WHERE user_id = $1",
        [owner.userId],
      )
      expect(row).toMatchObject({ envelope_from: `noreply@${created.domain.domain}`, envelope_to: [to, bcc], message_id: res.body.data.id })
      // Each recipient's transaction would go with its own VERP return path.
      expect(row!.return_paths).toEqual([verp(capture, res.body.data.id, 0), verp(capture, res.body.data.id, 1)])
      const raw = Buffer.from(row!.raw).toString("utf8")
      expect(row!.size_bytes).toBe(Buffer.byteLength(raw))
      expect(raw).toContain("Subject: Captured")
      expect(raw).not.toContain(bcc)
      expect((await dkimOf(raw, `noreply@${created.domain.domain}`))[0]!.status.result).toBe("pass")
      // The same bytes over the API, for the owner only.
      const viaApi = await fetch(`${capture.url}/api/outbound/emails/${res.body.data.id}/raw`, { headers: { "x-api-key": owner.apiKey } })
      expect(viaApi.status).toBe(200)
      expect(viaApi.headers.get("content-type")).toContain("message/rfc822")
      expect(await viaApi.text()).toBe(raw)
      const stranger = await fundedAccount(capture, 0)
      expect((await capture.call("GET", `/api/outbound/emails/${res.body.data.id}/raw`, { token: stranger.apiKey })).status).toBe(403)
      expect(relay.received).toHaveLength(0)
    } finally {
      await capture.stop()
    }
  })
})
