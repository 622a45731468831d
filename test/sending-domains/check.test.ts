/** The record matchers of sending-domain verification, record by record; SPF evaluated over a real DNS server. */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../effects/config.ts"
import type { Dns } from "../../effects/ports/Dns.ts"
import { dkimMatches, dmarcMatches, spfEndsWithFail, spfOutcome, tagList } from "../../effects/sending-domains/check.ts"
import { dnsLayer } from "../../src/providers/dns.ts"
import { testSettings } from "../support/app.ts"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"

const key = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAx" + "A".repeat(300) + "IDAQAB"
const txt = (...records: Array<string | Array<string>>) => records.map((r) => (typeof r === "string" ? [r] : r))

describe("DKIM", () => {
  it("matches our key in full, however the TXT strings are split or quoted", () => {
    expect(dkimMatches(txt(`v=DKIM1; k=rsa; p=${key}`), key)).toBe(true)
    expect(dkimMatches(txt([`v=DKIM1; k=rsa; p=${key.slice(0, 200)}`, key.slice(200)]), key)).toBe(true)
    expect(dkimMatches(txt(`"v=DKIM1; k=rsa; p=${key.slice(0, 200)}" "${key.slice(200)}"`), key)).toBe(true)
    expect(dkimMatches(txt(`p=${key.slice(0, 100)} ${key.slice(100)};`), key)).toBe(true)
    expect(dkimMatches(txt(`v=DKIM1;k=rsa;t=s;p=${key}`), key)).toBe(true)
  })

  it("refuses a partial or different key, another key type or version, and several records", () => {
    expect(dkimMatches(txt(`v=DKIM1; k=rsa; p=${key.slice(0, -1)}`), key)).toBe(false)
    expect(dkimMatches(txt(`v=DKIM1; k=rsa; p=${key}AB`), key)).toBe(false)
    expect(dkimMatches(txt(`v=DKIM1; k=rsa; p=`), key)).toBe(false)
    expect(dkimMatches(txt(`v=DKIM1; k=ed25519; p=${key}`), key)).toBe(false)
    expect(dkimMatches(txt(`v=DKIM2; p=${key}`), key)).toBe(false)
    expect(dkimMatches(txt(`v=DKIM1; p=${key}`, `v=DKIM1; p=${key}`), key)).toBe(false)
    expect(dkimMatches([], key)).toBe(false)
  })
})

describe("SPF policy", () => {
  it("needs exactly one v=spf1 record, and its last term -all", () => {
    expect(spfEndsWithFail(txt("google-site-verification=abc", "v=spf1 ip4:196.41.1.10 -all"))).toBe(true)
    expect(spfEndsWithFail(txt("V=SPF1 MX -ALL"))).toBe(true)
    for (
      const records of [
        txt("v=spf1 ip4:196.41.1.10 ~all"),
        txt("v=spf1 ip4:196.41.1.10 ?all"),
        txt("v=spf1 ip4:196.41.1.10"),
        txt("v=spf1 -all ip4:196.41.1.10"),
        txt("v=spf1 ip4:196.41.1.10 -all", "v=spf1 mx -all"),
        txt("v=spf10 ip4:196.41.1.10 -all"),
        [],
      ]
    ) expect(spfEndsWithFail(records), JSON.stringify(records)).toBe(false)
  })
})

describe("SPF evaluated over DNS (mailauth, through the Dns port)", () => {
  const ip = "196.41.1.10"
  let dns: TestDnsServer
  let layer: Layer.Layer<Dns>
  let n = 0
  beforeAll(async () => {
    dns = await startDnsServer({
      "_spf.google.com": { TXT: ["v=spf1 ip4:209.85.128.0/17 ~all"] },
      "_spf.provider.example": { TXT: ["v=spf1 ip4:41.59.0.0/16 include:_spf2.provider.example -all"] },
      "_spf2.provider.example": { TXT: ["v=spf1 ip4:196.41.0.0/16 -all"] },
      "_spf.other.example": { TXT: ["v=spf1 ip4:41.59.0.0/16 -all"] },
      "mail.example.co.tz": { MX: ["10 mx1.example.co.tz"] },
      "mx1.example.co.tz": { A: [ip] },
      // Eleven includes deep: past the 10-lookup limit of RFC 7208 4.6.4.
      ...Object.fromEntries(Array.from({ length: 11 }, (_, i) => [
        `l${i}.deep.example`,
        { TXT: [i < 10 ? `v=spf1 include:l${i + 1}.deep.example -all` : `v=spf1 ip4:${ip} -all`] },
      ])),
    })
    dns.fail("_spf.down.example")
    layer = dnsLayer.pipe(Layer.provide(Layer.succeed(AppConfig, testSettings({ dnsServers: [dns.address] }))))
  })
  afterAll(() => dns?.close())

  /** The SPF outcome for a fresh domain whose apex carries `records` (and `extra` names). */
  const judge = (records: ReadonlyArray<string>, extra: { mx?: boolean; a?: boolean } = {}, serverIp = ip) => {
    const domain = `d${++n}.spf-test.co.tz`
    dns.set(domain, "TXT", records)
    if (extra.mx) dns.set(domain, "MX", ["10 mx1.example.co.tz"])
    if (extra.a) dns.set(domain, "A", [serverIp])
    return Effect.runPromise(Effect.provide(spfOutcome(domain, serverIp), layer))
  }

  it.each<[string, ReadonlyArray<string>, { mx?: boolean; a?: boolean }]>([
    ["our ip4", ["google-site-verification=abc", `v=spf1 ip4:${ip} -all`], {}],
    ["a non-matching include, then our ip4/32", [`v=spf1 include:_spf.google.com +ip4:${ip}/32 -all`], {}],
    ["an ip4 CIDR that covers us", ["v=spf1 ip4:196.41.1.0/24 -all"], {}],
    ["our own address as a /24", [`v=spf1 ip4:${ip}/24 -all`], {}],
    ["an include: chain that reaches a covering CIDR", ["v=spf1 include:_spf.provider.example -all"], {}],
    ["mx, with the domain's MX at our server", ["v=spf1 mx -all"], { mx: true }],
    ["mx:<host> whose MX is our server", ["V=SPF1 MX:mail.example.co.tz -ALL"], {}],
    ["a, with the domain's A at our server", ["v=spf1 a mx/24 -all"], { a: true }],
  ])("passes %s", async (_, records, extra) => {
    expect(await judge(records, extra)).toBe("match")
  })

  it.each<[string, ReadonlyArray<string>, { mx?: boolean; a?: boolean }]>([
    ["a soft ending", [`v=spf1 ip4:${ip} ~all`], {}],
    ["a neutral ending", [`v=spf1 ip4:${ip} ?all`], {}],
    ["no ending", [`v=spf1 ip4:${ip}`], {}],
    ["-all first", [`v=spf1 -all ip4:${ip}`], {}],
    ["another address", ["v=spf1 ip4:196.41.1.100 -all"], {}],
    ["a CIDR that does not cover us", ["v=spf1 ip4:196.41.2.0/24 -all"], {}],
    ["our address negated", [`v=spf1 -ip4:${ip} -all`], {}],
    ["an include that does not exist", ["v=spf1 include:_spf.example.net -all"], {}],
    ["an include that does not cover us", ["v=spf1 include:_spf.other.example -all"], {}],
    ["an include loop", ["v=spf1 include:d-loop.spf-test.co.tz -all"], {}],
    ["more than 10 lookups", ["v=spf1 include:l0.deep.example -all"], {}],
    ["mx without an MX record", ["v=spf1 mx -all"], {}],
    ["two SPF records", [`v=spf1 ip4:${ip} -all`, "v=spf1 mx -all"], {}],
    ["v=spf10", [`v=spf10 ip4:${ip} -all`], {}],
    ["no record at all", [], {}],
  ])("does not pass %s", async (label, records, extra) => {
    if (label === "an include loop") dns.set("d-loop.spf-test.co.tz", "TXT", ["v=spf1 include:d-loop.spf-test.co.tz -all"])
    expect(await judge(records, extra)).toBe("miss")
  })

  it("accepts ip6 for an IPv6 mail server", async () => {
    expect(await judge(["v=spf1 ip6:2001:db8::25 -all"], {}, "2001:db8::25")).toBe("match")
    expect(await judge(["v=spf1 ip6:2001:db8::/64 -all"], {}, "2001:db8::25")).toBe("match")
    expect(await judge(["v=spf1 ip6:2001:db8:1::/64 -all"], {}, "2001:db8::25")).toBe("miss")
  })

  it("answers unknown, not a miss, when DNS fails on the way (an include's server is down)", async () => {
    expect(await judge(["v=spf1 include:_spf.down.example -all"])).toBe("unknown")
  })
})

describe("DMARC", () => {
  it("needs exactly one record with policy quarantine or reject", () => {
    expect(dmarcMatches(txt("v=DMARC1; p=quarantine; sp=quarantine; rua=mailto:dmarc@inbox.localhost; adkim=s; aspf=s"))).toBe(true)
    expect(dmarcMatches(txt("v=DMARC1;p=REJECT"))).toBe(true)
    expect(dmarcMatches(txt("v=DMARC1; p=none; rua=mailto:x@example.net"))).toBe(false)
    expect(dmarcMatches(txt("v=DMARC1; sp=reject"))).toBe(false)
    expect(dmarcMatches(txt("p=reject"))).toBe(false)
    expect(dmarcMatches(txt("v=DMARC1; p=reject", "v=DMARC1; p=quarantine"))).toBe(false)
    expect(dmarcMatches([])).toBe(false)
  })
})

describe("tagList", () => {
  it("reads tag=value pairs with spaces and an empty last tag", () => {
    expect(Object.fromEntries(tagList(" v = DKIM1 ;K=rsa; p=abc ; "))).toEqual({ v: "DKIM1", k: "rsa", p: "abc" })
  })
})
