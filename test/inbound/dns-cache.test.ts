/**
 * The DNS adapter: real questions over UDP (and TCP when truncated) to a DNS server on loopback,
 * answered in node:dns shapes; the cache in front of `resolve` (what mailauth asks) keeps answers
 * exactly as long as their TTL says (TestClock moves time), shares concurrent questions, keeps
 * negative answers only with an SOA, and never keeps failures.
 */
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../effects/config.ts"
import { Dns } from "../../effects/ports/Dns.ts"
import { dnsLayer, MAX_TTL_SECONDS } from "../../src/providers/dns.ts"
import { createAccount } from "../support/accounts.ts"
import { testSettings } from "../support/app.ts"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"
import { createAddress, fund, type InboundTestApp, plainMessage, startInboundApp } from "../support/inbound.ts"
import { sendRaw } from "../support/smtp-client.ts"

let dns: TestDnsServer
let layer: Layer.Layer<Dns>
beforeAll(async () => {
  dns = await startDnsServer()
  layer = dnsLayer.pipe(Layer.provide(Layer.succeed(AppConfig, AppConfig.of(testSettings({ dnsServers: [dns.address] })))))
})
afterAll(() => dns.close())

let n = 0
const fresh = (label: string) => `${label}-${++n}-${Math.random().toString(16).slice(2, 8)}.cache.test`

/** Runs `f` with one Dns service (one cache) under TestClock. */
const withDns = <A, E>(f: (d: Dns["Service"]) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      return yield* f(yield* Dns)
    }).pipe(Effect.provide(layer), Effect.provide(TestClock.layer())),
  )

const failure = <A>(e: Effect.Effect<A, { readonly code: string }>) => Effect.flip(e).pipe(Effect.map((err) => err.code))

describe("answers on the wire", () => {
  it("come in node:dns shapes: TXT character-strings, MX, A, AAAA, PTR, CNAME", async () => {
    const name = fresh("shapes")
    const long = `v=DKIM1; k=rsa; p=${"A".repeat(400)}`
    dns.set(name, "TXT", ["v=spf1 -all", long])
    dns.set(name, "MX", ["10 mx1.example", "20 mx2.example"])
    dns.set(name, "A", ["192.0.2.1"])
    dns.set(name, "AAAA", ["2001:db8:0:0:0:0:0:1"])
    dns.set(name, "PTR", ["host.example"])
    dns.set(`www.${name}`, "CNAME", [name])
    const got = await withDns((d) =>
      Effect.all({
        txt: d.resolve(name, "TXT"),
        mx: d.resolve(name, "MX"),
        a: d.resolve(name, "A"),
        aaaa: d.resolve(name, "AAAA"),
        ptr: d.resolve(name, "PTR"),
        cname: d.resolve(`www.${name}`, "CNAME"),
      })
    )
    expect(got.txt).toEqual([["v=spf1 -all"], [long.slice(0, 255), long.slice(255)]])
    expect(got.mx).toEqual([{ priority: 10, exchange: "mx1.example" }, { priority: 20, exchange: "mx2.example" }])
    expect(got.a).toEqual(["192.0.2.1"])
    expect(got.aaaa).toEqual(["2001:db8::1"])
    expect(got.ptr).toEqual(["host.example"])
    expect(got.cname).toEqual([name])
  })

  it("fail with node:dns codes: ENOTFOUND, ENODATA, ESERVFAIL", async () => {
    const name = fresh("codes")
    dns.set(name, "A", ["192.0.2.1"])
    const broken = fresh("broken")
    dns.set(broken, "A", ["192.0.2.2"])
    dns.fail(broken)
    const codes = await withDns((d) =>
      Effect.all([failure(d.resolve(fresh("missing"), "TXT")), failure(d.resolve(name, "TXT")), failure(d.resolve(broken, "A"))])
    )
    expect(codes).toEqual(["ENOTFOUND", "ENODATA", "ESERVFAIL"])
  })

  it("asks again over TCP when the UDP answer is truncated", async () => {
    const name = fresh("tcp")
    dns.set(name, "TXT", ["v=spf1 ip4:192.0.2.0/24 -all"])
    dns.truncateUdp(true)
    try {
      const before = dns.tcpQueries()
      expect(await withDns((d) => d.resolve(name, "TXT"))).toEqual([["v=spf1 ip4:192.0.2.0/24 -all"]])
      expect(dns.tcpQueries()).toBe(before + 1)
    } finally {
      dns.truncateUdp(false)
    }
  })
})

describe("the cache", () => {
  it("keeps an answer exactly as long as its TTL, then asks again and sees the change", async () => {
    const name = fresh("ttl")
    dns.set(name, "TXT", ["v=spf1 -all"])
    dns.ttl(name, 30)
    const seen = await withDns((d) =>
      Effect.gen(function*() {
        const asked: Array<number> = []
        const start = dns.queries()
        const ask = Effect.tap(d.resolve(name, "TXT"), () => Effect.sync(() => asked.push(dns.queries() - start)))
        const first = yield* ask
        yield* ask
        yield* TestClock.adjust("29 seconds")
        dns.set(name, "TXT", ["v=spf1 ip4:192.0.2.9 -all"])
        const stillCached = yield* ask
        yield* TestClock.adjust("2 seconds")
        const refreshed = yield* ask
        return { asked, first, stillCached, refreshed }
      })
    )
    expect(seen.asked).toEqual([1, 1, 1, 2])
    expect(seen.first).toEqual([["v=spf1 -all"]])
    expect(seen.stillCached).toEqual([["v=spf1 -all"]])
    expect(seen.refreshed).toEqual([["v=spf1 ip4:192.0.2.9 -all"]])
  })

  it("never keeps a TTL of 0, and keeps none longer than an hour", async () => {
    const zero = fresh("zero")
    dns.set(zero, "A", ["192.0.2.3"])
    dns.ttl(zero, 0)
    const day = fresh("day")
    dns.set(day, "A", ["192.0.2.4"])
    dns.ttl(day, 86_400)
    const asked = await withDns((d) =>
      Effect.gen(function*() {
        const start = dns.queries()
        yield* d.resolve(zero, "A")
        yield* d.resolve(zero, "A")
        const afterZero = dns.queries() - start
        yield* d.resolve(day, "A")
        yield* TestClock.adjust(`${MAX_TTL_SECONDS - 1} seconds`)
        yield* d.resolve(day, "A")
        const withinHour = dns.queries() - start
        yield* TestClock.adjust("2 seconds")
        yield* d.resolve(day, "A")
        return [afterZero, withinHour, dns.queries() - start]
      })
    )
    expect(asked).toEqual([2, 3, 4])
  })

  it("keeps a negative answer for its SOA minimum, and not at all without an SOA", async () => {
    const asked = await withDns((d) =>
      Effect.gen(function*() {
        const start = dns.queries()
        const bare = fresh("nosoa")
        yield* failure(d.resolve(bare, "TXT"))
        yield* failure(d.resolve(bare, "TXT"))
        const withoutSoa = dns.queries() - start
        dns.negativeTtl(60)
        const gone = fresh("nxdomain")
        yield* failure(d.resolve(gone, "TXT"))
        yield* failure(d.resolve(gone, "TXT"))
        dns.set(gone, "TXT", ["published meanwhile"])
        yield* TestClock.adjust("59 seconds")
        const code = yield* failure(d.resolve(gone, "TXT"))
        yield* TestClock.adjust("2 seconds")
        const after = yield* d.resolve(gone, "TXT")
        return { withoutSoa, total: dns.queries() - start, code, after }
      }).pipe(Effect.ensuring(Effect.sync(() => dns.negativeTtl(undefined))))
    )
    expect(asked).toEqual({ withoutSoa: 2, total: 4, code: "ENOTFOUND", after: [["published meanwhile"]] })
  })

  it("never keeps a failure (SERVFAIL): the next question asks again", async () => {
    const name = fresh("servfail")
    dns.set(name, "TXT", ["ok"])
    dns.fail(name)
    const result = await withDns((d) =>
      Effect.gen(function*() {
        const start = dns.queries()
        const code = yield* failure(d.resolve(name, "TXT"))
        dns.fail(name, false)
        const answer = yield* d.resolve(name, "TXT")
        return { code, answer, asked: dns.queries() - start }
      })
    )
    // Two tries each round against the one server: the failure cost 2 questions, the answer 1.
    expect(result).toEqual({ code: "ESERVFAIL", answer: [["ok"]], asked: 3 })
  })

  it("shares one question among concurrent askers", async () => {
    const name = fresh("shared")
    dns.set(name, "TXT", ["v=spf1 -all"])
    dns.ttl(name, 60)
    const result = await withDns((d) =>
      Effect.gen(function*() {
        const start = dns.queries()
        const answers = yield* Effect.all(Array.from({ length: 20 }, () => d.resolve(name, "TXT")), { concurrency: "unbounded" })
        return { answers: new Set(answers.map((a) => JSON.stringify(a))).size, asked: dns.queries() - start }
      })
    )
    expect(result).toEqual({ answers: 1, asked: 1 })
  })

  it("leaves domain verification uncached: a record published a moment ago counts", async () => {
    const name = fresh("verify")
    dns.ttl(name, 3600)
    const seen = await withDns((d) =>
      Effect.gen(function*() {
        const before = yield* Effect.flip(d.txt(name)).pipe(Effect.map((e) => e.code))
        dns.set(name, "TXT", ["mail-verify=abc"])
        const after = yield* d.txt(name)
        return { before, after }
      })
    )
    expect(seen).toEqual({ before: "ENOTFOUND", after: [["mail-verify=abc"]] })
  })
})

describe("mail authentication through the cache", () => {
  let app: InboundTestApp
  beforeAll(async () => {
    app = await startInboundApp()
  })
  afterAll(() => app.stop())

  it("asks DNS about a sender once, not for every message", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 100)
    const address = await createAddress(app.api, apiKey, `cache-${Math.random().toString(16).slice(2, 8)}`)
    const domain = fresh("sender")
    app.dns.set(domain, "TXT", ["v=spf1 ip4:127.0.0.1 -all"])
    app.dns.set(`_dmarc.${domain}`, "TXT", ["v=DMARC1; p=none"])
    app.dns.ttl(domain, 300)
    app.dns.ttl(`_dmarc.${domain}`, 300)
    // As from a real recursive resolver: "no such record" answers carry the zone's SOA.
    app.dns.negativeTtl(300)
    const send = () => sendRaw(app.mx, { from: `a@${domain}`, to: [address.email], raw: plainMessage({ from: `a@${domain}` }) })
    const start = app.dns.queries()
    expect((await send()).data?.code).toBe(250)
    const first = app.dns.queries() - start
    expect(first).toBeGreaterThan(0)
    for (let i = 0; i < 3; i++) expect((await send()).data?.code).toBe(250)
    app.dns.negativeTtl(undefined)
    expect(app.dns.queries() - start).toBe(first)
  })
})
