/**
 * Property-based fuzz of every route of the table (src/http/routes/index.ts `allRoutes`),
 * generated from each route's method, path, auth and schemas (./http-arbitraries.ts): hostile
 * bodies, queries and path parameters (NUL and control characters, lone surrogates, huge and
 * negative numbers, deep nesting, wrong types, long strings, odd Unicode), sent over HTTP with
 * real credentials so the handlers are reached. Properties (DECISIONS.md "Hostile input"):
 * never a 5xx, always the envelope on JSON answers and every error, and no money moved on a 4xx
 * (the account's balance unchanged, and equal to its ledger sum).
 *
 * Bounded and seeded in `npm test`; a longer run: FUZZ_RUNS=500 FUZZ_SEED=7 npx vitest run test/fuzz/http.test.ts
 */
import { Layer, Option } from "effect"
import fc from "fast-check"
import { createHmac } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { Ingest } from "../../effects/ingest/service.ts"
import { OutboundRateLimit } from "../../effects/outbound/limits.ts"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { allRoutes } from "../../src/http/routes/index.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"
import { type HostileServer, startHostileServer } from "../support/hostile-http.ts"
import { query } from "../support/inbound.ts"
import { fastHashing, roomyAuthLimits } from "../support/platform.ts"
import { type FuzzRequest, type FuzzWorld, requestFor } from "./http-arbitraries.ts"

const RUNS = Number(process.env.FUZZ_RUNS ?? 12)
const SEED = Number(process.env.FUZZ_SEED ?? 20261123)

const AI_BASE_URL = "http://ai.fuzz.test/v1"
const JWKS_URL = "http://jwks.fuzz.test/certs"

/** The providers answer like healthy ones, so a 5xx can only be the service's own doing. */
const providers: typeof globalThis.fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input)
  if (url.startsWith(AI_BASE_URL)) {
    return Response.json({
      id: "c",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "Asante." } }],
    })
  }
  if (url.startsWith(JWKS_URL)) return Response.json({ keys: [] })
  return globalThis.fetch(input, init)
}

let api: TestApp
let dns: TestDnsServer
let receiver: HostileServer
let account: TestAccount
let world: FuzzWorld
const statuses = new Map<number, number>()
let sent = 0

const created = async (method: string, path: string, body: unknown, token = account.apiKey) => {
  const res = await api.call(method, path, { token, body })
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300)
  return res.body.data
}

beforeAll(async () => {
  dns = await startDnsServer({})
  receiver = await startHostileServer({ kind: "json", body: "{}" })
  api = await makeTestApp({
    workers: false,
    settings: {
      dnsServers: [dns.address],
      aiBaseUrl: Option.some(AI_BASE_URL),
      aiApiKey: Option.some("sk-fuzz"),
      googleClientId: Option.some("fuzz.apps.googleusercontent.com"),
      googleJwksUrl: JWKS_URL,
    },
    infrastructure: Layer.mergeAll(
      Layer.succeed(HttpClient, HttpClient.make(providers)),
      // Sends are rate limited to 2/s; the fuzz would mostly meet 429s instead of the handlers.
      Layer.succeed(OutboundRateLimit, { limit: 100_000, window: "1 second", burst: 100_000 }),
      fastHashing,
      roomyAuthLimits,
    ) as Layer.Layer<any, never, never>,
  })
  account = await createAccount(api)
  await api.run(Billing.use((b) => b.credit({ userId: account.userId, amount: 10_000_000, kind: "credit", reference: { type: "test" } })))
  const address = await created("POST", "/api/inbound/addresses", { local_part: "fuzz" })
  const template = await created("POST", "/api/outbound/templates", { name: "t", subject: "Hi {{name}}", text_body: "Habari {{name}}" })
  const webhook = await created("POST", "/api/webhook/webhooks", { address_id: address.id, url: receiver.url })
  const domain = await created("POST", "/api/domains", { domain: "fuzz-send.example.co.tz" })
  const receiving = await created("POST", "/api/inbound/domains", { domain: "fuzz-receive.example.co.tz" })
  const sms = await created("POST", "/api/sms/notifications", { address_id: address.id, phone_number: "+255712345678", provider_key: "sms-key-123456" })
  const topup = await created("POST", "/api/billing/topup", { amount_tzs: 2000 })
  const spare = await created("POST", "/api/apikeys", { name: "spare" }, account.token)
  const [messageId] = await api.run(Ingest.use((i) =>
    i.deliver({
      raw: Buffer.from("From: a@sender.example\r\nTo: fuzz@inbox.localhost\r\nSubject: hi\r\n\r\nbody\r\n"),
      mailFrom: "a@sender.example",
      recipients: [address.email],
      client: { ip: "127.0.0.1", helo: "sender.example" },
    })
  ))
  world = {
    addressId: address.id,
    templateId: template.id,
    webhookId: webhook.id,
    domainId: domain.domain.id,
    receivingDomainId: receiving.id,
    messageId: messageId!,
    smsRuleId: sms.id,
    topupId: topup.topup.id,
    spareKeyId: spare.api_key.id,
    receiverUrl: receiver.url,
    fakeReference: topup.provider_reference,
  }
}, 120_000)

afterAll(async () => {
  // The counts, for the CI log.
  console.log(`http fuzz: ${sent} requests over ${allRoutes.length} routes (seed ${SEED}, ${RUNS} per route); statuses ${
    JSON.stringify(Object.fromEntries([...statuses].sort(([a], [b]) => a - b)))
  }`)
  await api?.stop()
  await receiver?.close()
  await dns?.close()
})

const balanceAndLedger = async () => {
  const [row] = await query<{ balance: number; ledger: number }>(
    api,
    `SELECT COALESCE((SELECT balance_tzs FROM wallets WHERE user_id = $1), 0)::int8 AS balance,
            COALESCE((SELECT sum(amount_tzs) FROM ledger_entries WHERE user_id = $1), 0)::int8 AS ledger`,
    [account.userId],
  )
  return row!
}

const describeRequest = (r: FuzzRequest) =>
  `${r.method} ${r.path.slice(0, 300)} (${r.note}) body: ${JSON.stringify((r.body ?? "").slice(0, 300))}`

/** Sends one request and checks the properties; a broken one fails with what was sent. */
const check = async (r: FuzzRequest) => {
  const before = await balanceAndLedger()
  const res = await fetch(api.url + r.path, { method: r.method, headers: r.headers, body: r.body })
  const text = await res.text()
  sent++
  statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
  const what = `${describeRequest(r)} → ${res.status} ${text.slice(0, 300)}`
  expect(res.status, what).toBeLessThan(500)
  const json = (res.headers.get("content-type") ?? "").startsWith("application/json")
  // Errors are always the envelope; successes too unless the route answers a page or raw MIME.
  if (json || res.status >= 400) {
    const body = JSON.parse(text) as Record<string, unknown>
    if (!r.path.startsWith("/api/openapi.json")) {
      expect(typeof body.success, what).toBe("boolean")
      if (res.status >= 400) expect(body.success, what).toBe(false)
      expect(typeof body.request_id, what).toBe("string")
      expect(typeof body.timestamp, what).toBe("string")
      if (res.status >= 400) expect(Array.isArray(body.errors) && body.errors.length > 0, what).toBe(true)
    }
  }
  const after = await balanceAndLedger()
  expect(after.balance, `ledger out of step after ${what}`).toBe(after.ledger)
  if (res.status >= 400) expect(after.balance, `money moved on a ${res.status}: ${what}`).toBe(before.balance)
}

/** A stable seed per route, so a failure replays alone with the same FUZZ_SEED. */
const seedOf = (route: string) => [...route].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, SEED)

describe("HTTP fuzz over the route table", () => {
  it("covers every route", () => {
    expect(allRoutes.length).toBeGreaterThan(80)
  })

  for (const route of allRoutes) {
    const name = `${route.method.toUpperCase()} ${route.path}`
    it(name, { timeout: 120_000 }, async () => {
      const credentials = {
        apiKey: account.apiKey,
        token: account.token,
        sign: (body: string) => createHmac("sha256", api.settings.paymentWebhookSecret).update(body).digest("hex"),
      }
      await fc.assert(fc.asyncProperty(requestFor(route, world, credentials), check), {
        numRuns: RUNS,
        seed: seedOf(name),
        endOnFailure: true,
      })
    })
  }

  it("leaves every wallet equal to its ledger", async () => {
    const broken = await query(api, `
      SELECT w.user_id FROM wallets w
        LEFT JOIN (SELECT user_id, sum(amount_tzs) AS s FROM ledger_entries GROUP BY user_id) l ON l.user_id = w.user_id
       WHERE w.balance_tzs <> COALESCE(l.s, 0) OR w.balance_tzs < 0`)
    expect(broken).toEqual([])
  })
})
