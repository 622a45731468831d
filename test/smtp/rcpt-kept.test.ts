/**
 * RCPT TO answered without a fiber (`recipientKept`, used first by the MX) against the same RCPT
 * by way of a lookup (`recipientLooked`): for any sequence of recipients (busy addresses in their
 * many spellings, a wallet that covers only a few copies, a suspended domain, unknown and
 * malformed recipients, a forged return path), both answer the same replies in the same order and
 * leave the same destinations and holds in the envelope. And the kept path does answer: a busy
 * address, a wallet run dry and a suspended domain, without a query.
 */
import { Effect, Exit } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import { Ingest, type IngestShape } from "../../effects/ingest/service.ts"
import { type MxSessionState, newSessionState, recipientKept, recipientLooked } from "../../src/smtp/session.ts"
import { createAccount } from "../support/accounts.ts"
import { createAddress, fund, type InboundTestApp, query, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
let ingest: IngestShape
/** The recipients the sequences draw from. */
let pool: Array<string>
let busy: string
let dry: string
let suspended: string

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}`

/** A verified receiving domain of the account, with its records published on the test DNS. */
const verifiedDomain = async (apiKey: string) => {
  const created = await app.api.call("POST", "/api/inbound/domains", { token: apiKey, body: { domain: `${unique("shop")}.co.tz` } })
  const d = created.body.data as { id: number; domain: string; verification_records: Array<{ type: string; host: string; value: string }> }
  for (const r of d.verification_records) app.dns.set(r.host === "@" ? d.domain : r.host, r.type as "TXT" | "MX" | "A", [r.value])
  const verified = await app.api.call("POST", `/api/inbound/domains/${d.id}/verify`, { token: apiKey })
  expect(verified.body.data.status).toBe("verified")
  return d
}

beforeAll(async () => {
  app = await startInboundApp()
  ingest = await app.api.run(Ingest.useSync((i) => i))
  const rich = await createAccount(app.api)
  await fund(app.api, rich.userId, 1000)
  const poor = await createAccount(app.api)
  await fund(app.api, poor.userId, 5) // one copy at a time
  const owner = await createAccount(app.api)
  await fund(app.api, owner.userId, 1000)
  const domain = await verifiedDomain(owner.apiKey)
  const shop = await createAddress(app.api, owner.apiKey, "orders", { domain_id: domain.id })
  // Through the Database port, as the re-check worker writes it: the routes kept are forgotten.
  await query(app.api, "UPDATE receiving_domains SET status = 'suspended' WHERE id = $1", [domain.id])

  const r1 = await createAddress(app.api, rich.apiKey, unique("r1"))
  const r2 = await createAddress(app.api, rich.apiKey, unique("r2"))
  const p1 = await createAddress(app.api, poor.apiKey, unique("p1"))
  const p2 = await createAddress(app.api, poor.apiKey, unique("p2"))
  busy = r1.email
  dry = p1.email
  suspended = shop.email
  pool = [
    r1.email,
    r1.email.toUpperCase(),
    r1.email.replace("@", "+news@"),
    r2.email,
    p1.email,
    p1.email.replace("@", "+a@"),
    p2.email,
    shop.email,
    `nobody-${r1.email}`,
    "no-at-sign",
    "bounces+1.0.forged@inbox.localhost",
  ]
})
afterAll(() => app.stop())

type Answer = number | { readonly code: number; readonly message: string }

/** What the envelope holds: destinations in RCPT order and the TZS held per account. */
const snapshot = (state: MxSessionState) => ({
  destinations: [...state.envelope.destinations.entries()].map(([id, d]) => [id, d.rcpt]),
  held: [...state.envelope.held.entries()],
  badRecipients: state.badRecipients,
})

/**
 * One transaction's RCPTs, each kept-first (as the MX asks) or by lookup only; the answers and the
 * envelope, then the holds let go. `keptAnswers` counts the RCPTs the kept path answered.
 */
const transaction = async (recipients: ReadonlyArray<string>, keptFirst: boolean, counter = { keptAnswers: 0 }) => {
  const state = newSessionState()
  const answers: Array<Answer> = []
  for (const r of recipients) {
    const kept = keptFirst ? recipientKept(ingest, state, r) : undefined
    if (kept) counter.keptAnswers++
    const exit = kept ?? await app.api.run(Effect.exit(recipientLooked(ingest, state, r)))
    answers.push(Exit.isSuccess(exit) ? 250 : (() => {
      const e = exit.cause.reasons.find((x) => x._tag === "Fail") as { error: { code: number; message: string } } | undefined
      return e ? { code: e.error.code, message: e.error.message } : -1
    })())
  }
  const envelope = snapshot(state)
  await app.api.run(ingest.release(state.envelope))
  return { answers, envelope }
}

describe("RCPT TO answered from what is kept", () => {
  it("answers a busy address, a dry wallet and a suspended domain without a lookup, and leaves the rest to one", async () => {
    // Looked up once: kept from then on.
    await transaction([busy, dry, pool[6]!, suspended], false)
    const first = newSessionState()
    const second = newSessionState()
    const answer = (state: MxSessionState, r: string) => {
      const exit = recipientKept(ingest, state, r)
      return exit && (Exit.isSuccess(exit) ? 250 : (exit.cause.reasons[0] as unknown as { error: { code: number } }).error.code)
    }
    // Let go however the test ends: a hold left behind would skew the property below.
    onTestFinished(() => app.api.run(Effect.forEach([first, second], (s) => ingest.release(s.envelope), { discard: true })))
    // The poor wallet's 5 TZS pay one copy: the same address again is free, another is deferred.
    expect([busy, busy.replace("@", "+x@"), dry, dry.replace("@", "+a@"), pool[6]!].map((r) => answer(first, r))).toEqual([250, 250, 250, 250, 452])
    expect(answer(second, dry)).toBe(452)
    expect(answer(second, suspended)).toBe(451)
    expect(snapshot(first).held).toEqual([[expect.any(Number), 5], [expect.any(Number), 5]])
    // Never kept: an unknown or malformed recipient, a return path.
    for (const r of pool.slice(8)) expect(answer(second, r), r).toBeUndefined()
  })

  it("answers every sequence of recipients as a lookup would", async () => {
    const counter = { keptAnswers: 0 }
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat({ max: 10 }), { minLength: 1, maxLength: 14 }), async (picks) => {
        const recipients = picks.map((i) => pool[i]!)
        const kept = await transaction(recipients, true, counter)
        const looked = await transaction(recipients, false)
        expect(kept).toEqual(looked)
      }),
      { numRuns: 60 },
    )
    // The comparison means something only if the kept path answered much of it.
    expect(counter.keptAnswers).toBeGreaterThan(100)
  })
})
