/**
 * The memo of unsigned mail's verdicts (effects/ingest/verdicts.ts, used by authenticate.ts): a
 * kept verdict is exactly what mailauth would say of the message now; it lasts only while every
 * DNS answer it rests on may be kept; signed mail, failures and answers that may not be kept are
 * never kept.
 */
import fc from "fast-check"
import type { DNSResolver } from "mailauth"
import { authenticate as mailauth } from "mailauth"
import { describe, expect, it } from "vitest"
import { type Authenticated, authenticate } from "../../effects/ingest/authenticate.ts"
import { type KeptResolver, makeVerdictMemo, verdictKey } from "../../effects/ingest/verdicts.ts"

/** A zone whose answers may be kept until `keep.until` (a clock the test moves); counts questions. */
const zoneResolver = (zone: Record<string, Array<Array<string>>>, clock: { now: number; until: number }) => {
  const asked: Array<string> = []
  const ask: DNSResolver = async (name, rrtype) => {
    asked.push(`${rrtype} ${name}`)
    const records = zone[`${rrtype} ${name.toLowerCase()}`]
    if (records) return records
    throw Object.assign(new Error("no such record"), { code: "ENOTFOUND" })
  }
  const resolver: KeptResolver = Object.assign(ask, { keptUntil: () => clock.until })
  return { resolver, asked }
}

const ZONE = {
  "TXT sender.example": [["v=spf1 ip4:127.0.0.1 ip4:10.0.0.0/8 -all"]],
  "TXT _dmarc.sender.example": [["v=DMARC1; p=reject"]],
  "TXT other.example": [["v=spf1 -all"]],
  "TXT _dmarc.other.example": [["v=DMARC1; p=none"]],
}

const message = (headers: ReadonlyArray<string>, body = "Habari\r\n") => Buffer.from(`${headers.join("\r\n")}\r\n\r\n${body}`, "latin1")
const input = { ip: "127.0.0.1", helo: "mail.sender.example", sender: "asha@sender.example", mta: "mx.inbox.localhost" }

/** What mailauth says of the message itself, with nothing kept, in our shape. */
const fresh = (m: Buffer, i: typeof input, resolver: DNSResolver) => authenticate(m, i, resolver)

describe("the memo of unsigned mail's verdicts", () => {
  it("answers what mailauth would say of each message, however its other headers and body differ (property)", async () => {
    const clock = { now: 0, until: Number.POSITIVE_INFINITY }
    const { resolver } = zoneResolver(ZONE, clock)
    const memo = makeVerdictMemo<Authenticated>(() => clock.now)
    const fromField = fc.constantFrom(
      "From: Asha <asha@sender.example>",
      "From: asha@sender.example",
      "From: \"Asha, M\" <asha@sender.example>",
      "From: Juma <juma@other.example>",
      "From: Asha <asha@sender.example>, Juma <juma@other.example>",
      "From: team: asha@sender.example, juma@other.example;",
      "From:\r\n Asha <asha@sender.example>",
      "FROM : asha@other.example",
      "from: <>",
    )
    const other = fc.constantFrom(
      "Subject: Ankara ya mwezi",
      "To: box@inbox.localhost",
      "Message-ID: <1@sender.example>",
      "Reply-To: juma@other.example",
      "Sender: juma@other.example",
      "Return-Path: <x@other.example>",
      "Received: from a.example (a.example [10.1.2.3]) by b.example",
      "X-From: asha@other.example",
    )
    const arb = fc.record({
      from: fc.array(fromField, { maxLength: 2 }),
      others: fc.array(other, { maxLength: 4 }),
      body: fc.constantFrom("Habari\r\n", "", "From: not a header\r\n", "na mengine\r\n".repeat(20)),
      ip: fc.constantFrom("127.0.0.1", "10.9.8.7", "192.0.2.1"),
      sender: fc.constantFrom("asha@sender.example", "juma@other.example", ""),
      helo: fc.constantFrom("mail.sender.example", "other.example"),
    })
    await fc.assert(
      fc.asyncProperty(arb, async (c) => {
        const m = message([...c.others, ...c.from, "MIME-Version: 1.0"], c.body)
        const i = { ...input, ip: c.ip, sender: c.sender, helo: c.helo }
        const kept = await authenticate(m, i, resolver, memo)
        expect(kept).toEqual(await fresh(m, i, resolver))
      }),
      { numRuns: 300, seed: 20261125 },
    )
    // The property met the memo: most runs were answered from it.
    expect(memo.size()).toBeGreaterThan(0)
    expect(memo.size()).toBeLessThan(300)
  })

  it("asks DNS again once an answer it rests on may no longer be kept, and then says what DNS says now", async () => {
    const zone: Record<string, Array<Array<string>>> = { ...ZONE }
    const clock = { now: 0, until: 1_000 }
    const { resolver, asked } = zoneResolver(zone, clock)
    const memo = makeVerdictMemo<Authenticated>(() => clock.now)
    const m = message(["From: Asha <asha@sender.example>", "Subject: a"])
    const first = await authenticate(m, input, resolver, memo)
    expect(first.results.spf).toBe("pass")
    const questions = asked.length
    // Within the answers' lifetime: no question asked, the same verdicts for another message.
    clock.now = 999
    const again = await authenticate(message(["From: Asha <asha@sender.example>", "Subject: b"], "other body\r\n"), input, resolver, memo)
    expect(again).toEqual(first)
    expect(asked.length).toBe(questions)
    // The sender's SPF record changed; once the old answer's lifetime is over it counts.
    zone["TXT sender.example"] = [["v=spf1 -all"]]
    clock.now = 1_000
    clock.until = 5_000
    const later = await authenticate(m, input, resolver, memo)
    expect(later.results.spf).toBe("fail")
    expect(asked.length).toBeGreaterThan(questions)
    expect(later).toEqual(await fresh(m, input, resolver))
  })

  it("keeps nothing resting on an answer that may not be kept, nothing for signed mail, and no failure", async () => {
    const clock = { now: 0, until: 0 }
    const { resolver, asked } = zoneResolver(ZONE, clock)
    const memo = makeVerdictMemo<Authenticated>(() => clock.now)
    const m = message(["From: Asha <asha@sender.example>"])
    await authenticate(m, input, resolver, memo)
    await authenticate(m, input, resolver, memo)
    expect(memo.size()).toBe(0)

    clock.until = Number.POSITIVE_INFINITY
    const signed = message(["DKIM-Signature: v=1; a=rsa-sha256; d=sender.example; s=mail; h=from; bh=x; b=y", "From: Asha <asha@sender.example>"])
    const sealed = message(["ARC-Seal: i=1; a=rsa-sha256; d=relay.example; s=a; cv=none; b=x", "From: Asha <asha@sender.example>"])
    expect(verdictKey(signed, input)).toBeUndefined()
    expect(verdictKey(sealed, input)).toBeUndefined()
    const before = asked.length
    for (const s of [signed, signed, sealed, sealed]) expect(await authenticate(s, input, resolver, memo)).toEqual(await fresh(s, input, resolver))
    expect(memo.size()).toBe(0)
    expect(asked.length).toBeGreaterThan(before)

    // A resolver that fails (an outage) gives temperror verdicts: never kept.
    const down: KeptResolver = Object.assign(async () => {
      throw Object.assign(new Error("servfail"), { code: "ESERVFAIL" })
    }, { keptUntil: () => Number.POSITIVE_INFINITY })
    const failed = await authenticate(m, input, down, memo)
    expect(failed.results.spf).toBe("temperror")
    expect(memo.size()).toBe(0)
  })

  it("agrees with mailauth reading the whole message", async () => {
    const clock = { now: 0, until: Number.POSITIVE_INFINITY }
    const { resolver } = zoneResolver(ZONE, clock)
    const memo = makeVerdictMemo<Authenticated>(() => clock.now)
    const m = message(["From: Asha <asha@sender.example>", "Subject: whole"])
    await authenticate(m, input, resolver, memo)
    const kept = await authenticate(m, input, resolver, memo)
    const whole = await mailauth(m, { ...input, resolver, disableBimi: true })
    expect(kept.headers).toBe(whole.headers)
    expect(kept.results.dmarc).toBe(whole.dmarc ? whole.dmarc.status.result : "none")
  })
})
