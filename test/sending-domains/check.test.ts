/** The record matchers of sending-domain verification, record by record. */
import { describe, expect, it } from "vitest"
import { dkimMatches, dmarcMatches, spfMatches, tagList } from "../../effects/sending-domains/check.ts"

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

describe("SPF", () => {
  const ip = "196.41.1.10"
  it("needs one v=spf1 record ending -all that passes our IP or MX", () => {
    for (
      const record of [
        `v=spf1 ip4:${ip} -all`,
        `v=spf1 include:_spf.google.com +ip4:${ip}/32 -all`,
        "v=spf1 mx -all",
        "V=SPF1 MX:mail.example.co.tz -ALL",
        "v=spf1 a mx/24 -all",
      ]
    ) expect(spfMatches(txt("google-site-verification=abc", record), ip), record).toBe(true)
  })

  it("refuses soft or neutral endings, other IPs, negated mechanisms and duplicate records", () => {
    for (
      const records of [
        txt(`v=spf1 ip4:${ip} ~all`),
        txt(`v=spf1 ip4:${ip} ?all`),
        txt(`v=spf1 ip4:${ip}`),
        txt(`v=spf1 -all ip4:${ip}`),
        txt("v=spf1 ip4:196.41.1.100 -all"),
        txt(`v=spf1 ip4:${ip}/24 -all`),
        txt(`v=spf1 -ip4:${ip} -all`),
        txt("v=spf1 include:_spf.example.net -all"),
        txt(`v=spf1 ip4:${ip} -all`, "v=spf1 mx -all"),
        txt(`v=spf10 ip4:${ip} -all`),
        [],
      ]
    ) expect(spfMatches(records, ip), JSON.stringify(records)).toBe(false)
  })

  it("accepts ip6 for an IPv6 mail server", () => {
    expect(spfMatches(txt("v=spf1 ip6:2001:db8::25 -all"), "2001:db8::25")).toBe(true)
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
