/**
 * The agent worker, one round at a time under TestClock: mail stored through the real ingest
 * (so the MessageEvents subscriber queues the job in the storing transaction), the fake AI
 * gateway on msw, and a recording OutboundSender. Covers auto and draft outcomes, every skip
 * rule end to end, the 24 h thread rule and thread reconstruction, AI and outbound failures with
 * their retries, and the at-most-one-reply guarantees.
 */
import { type Duration, Effect, type Layer, Random } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AGENT_MAX_ATTEMPTS } from "../../effects/agent/replier.ts"
import { AgentJobs } from "../../effects/agent/jobs.ts"
import { ProviderError, RateLimited, Forbidden, Suppressed } from "../../effects/errors.ts"
import type { OutboundSender } from "../../effects/outbound/contract.ts"
import { Database } from "../../effects/ports/Database.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { balance, createAddress, fund } from "../support/inbound.ts"
import { deliver, jobsOf, mail, mailFixture, makeFakeAi, noBalance, recordingSender, round } from "./support.ts"

const ai = makeFakeAi()
let dns: TestDnsServer
let api: TestApp
beforeAll(async () => {
  dns = await startDnsServer(zoneFixture("platform.json"))
  api = await makeTestApp({ workers: false, settings: { ...ai.settings, dnsServers: [dns.address] }, infrastructure: ai.layer })
})
afterAll(async () => {
  await api?.stop()
  await dns?.close()
})

interface Box {
  readonly account: TestAccount
  readonly addressId: number
  readonly email: string
}

const setup = async (config: Record<string, unknown> = { mode: "auto" }, balance = 1000): Promise<Box> => {
  const account = await createAccount(api)
  await fund(api, account.userId, balance)
  const address = await createAddress(api, account.apiKey, `shop-${Math.random().toString(16).slice(2, 8)}`)
  const res = await api.call("PUT", `/api/agent/configs/${address.id}`, { token: account.apiKey, body: config })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return { account, addressId: address.id, email: address.email }
}

const underTestClock = <A, E>(effect: Effect.Effect<A, E, any>, start = Date.now()) =>
  api.run(Effect.gen(function*() {
    yield* TestClock.setTime(start)
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer())))

const rounds = (box: Box, sender: Layer.Layer<OutboundSender>, ...waits: Array<Duration.Input>) =>
  underTestClock(Effect.gen(function*() {
    const taken: Array<number> = [yield* round([box.addressId], sender)]
    for (const wait of waits) {
      yield* TestClock.adjust(wait)
      taken.push(yield* round([box.addressId], sender))
    }
    return taken
  }))

const jobs = (box: Box) => api.run(jobsOf(box.addressId))

describe("auto mode", () => {
  it("sends one reply to the sender, threaded, marked auto-replied, from the configured address, and records it", async () => {
    const box = await setup({ mode: "auto", reply_from_address: "care@inbox.localhost" })
    const sender = recordingSender()
    ai.behave()
    const before = ai.requests.length
    const messageId = await deliver(api, mail({ to: box.email, subject: "Opening hours", messageId: "<q1@sender.example>" }), { to: box.email })
    expect(await jobs(box)).toMatchObject([{ message_id: messageId, status: "pending", attempt: 0 }])

    expect(await rounds(box, sender.layer)).toEqual([1])
    expect(sender.calls).toEqual([{
      userId: box.account.userId,
      request: {
        to: ["asha@sender.example"],
        subject: "Re: Opening hours",
        text_body: expect.stringMatching(/^Habari Neema,/),
        from_address: "care@inbox.localhost",
        headers: {
          "In-Reply-To": "<q1@sender.example>",
          References: "<q1@sender.example>",
          "Auto-Submitted": "auto-replied",
          "X-Auto-Response-Suppress": "All",
        },
      },
    }])
    const sent = ai.requests.slice(before)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.body.messages[0]!.content).toMatch(/Never invent facts/)
    expect(sent[0]!.body.messages.at(-1)).toEqual({ role: "user", content: expect.stringContaining("Habari, are you open on Saturday?") })
    expect(sent[0]!.body.messages.at(-1)!.content).toContain("From: Asha Mushi <asha@sender.example>")

    const [job] = await jobs(box)
    expect(job).toMatchObject({ status: "replied", attempt: 1, reason: null, outbound_message_id: 9001, sender: "asha@sender.example", thread_key: "opening hours", sending_at: null })
    const listed = await api.call("GET", `/api/agent/jobs?address_id=${box.addressId}`, { token: box.account.apiKey })
    expect(listed.body.data).toEqual([expect.objectContaining({ message_id: messageId, status: "replied", outbound_message_id: 9001, reason: null, attempt: 1 })])
    // Nothing more to do.
    expect(await rounds(box, sender.layer, "1 hour")).toEqual([0, 0])
  })

  it("sends from a verified sending domain and to Reply-To", async () => {
    const box = await setup({ mode: "auto" })
    await api.run(Database.use((db) =>
      db.query("UPDATE agent_configs SET reply_from_domain_id = 42, reply_from_address = 'hello@duka.example' WHERE address_id = $1", [box.addressId])
    ))
    const sender = recordingSender()
    await deliver(api, mail({ to: box.email, headers: ["Reply-To: Orders <orders@sender.example>"] }), { to: box.email })
    await rounds(box, sender.layer)
    expect(sender.calls[0]!.request).toMatchObject({ to: ["orders@sender.example"], from_domain_id: 42, from_address: "hello@duka.example" })
  })

  it("queues one job per message, and none when the agent is off or disabled", async () => {
    const box = await setup({ mode: "auto" })
    const id = await deliver(api, mail({ to: box.email }), { to: box.email })
    const again = await api.run(AgentJobs.use((j) =>
      j.enqueue({ id, userId: box.account.userId, addressId: box.addressId, fromAddr: "", toAddr: "", subject: "", smsBody: "", receivedAt: new Date() })
    ))
    expect(again).toBe(false)
    expect(await jobs(box)).toHaveLength(1)

    const off = await setup({ mode: "off" })
    await deliver(api, mail({ to: off.email }), { to: off.email })
    expect(await jobs(off)).toHaveLength(0)
    const disabled = await setup({ mode: "auto", enabled: false })
    await deliver(api, mail({ to: disabled.email }), { to: disabled.email })
    expect(await jobs(disabled)).toHaveLength(0)
    const none = await createAddress(api, off.account.apiKey, `plain-${Math.random().toString(16).slice(2, 8)}`)
    await deliver(api, mail({ to: none.email }), { to: none.email })
    expect(await api.run(jobsOf(none.id))).toHaveLength(0)
  })

  it("skips a job whose agent was turned off after it was queued", async () => {
    const box = await setup({ mode: "auto" })
    await deliver(api, mail({ to: box.email }), { to: box.email })
    await api.call("PUT", `/api/agent/configs/${box.addressId}`, { token: box.account.apiKey, body: { mode: "off" } })
    const sender = recordingSender()
    const before = ai.requests.length
    await rounds(box, sender.layer)
    expect(sender.calls).toHaveLength(0)
    expect(ai.requests.length).toBe(before)
    expect((await jobs(box))[0]).toMatchObject({ status: "skipped", reason: "the agent was turned off for this address" })
  })
})

describe("draft mode", () => {
  it("stores the reply for review, never sends, and lists it", async () => {
    const box = await setup({ mode: "draft", persona: "You are the Duka Bora assistant." })
    const sender = recordingSender()
    const before = ai.requests.length
    const messageId = await deliver(api, mail({ to: box.email, subject: "Bei ya sukari", body: "Sugar price please" }), { to: box.email })
    await rounds(box, sender.layer)
    expect(sender.calls).toHaveLength(0)
    expect(ai.requests[before]!.body.messages[0]!.content).toMatch(/^You are the Duka Bora assistant\./)
    const [job] = await jobs(box)
    expect(job).toMatchObject({ status: "drafted", reason: null, outbound_message_id: null })
    const res = await api.call("GET", `/api/agent/drafts?address_id=${box.addressId}`, { token: box.account.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual([{
      id: job!.draft_id,
      address_id: box.addressId,
      message_id: messageId,
      to_address: "asha@sender.example",
      subject: "Re: Bei ya sukari",
      text_body: expect.stringMatching(/^Habari Neema,/),
      created_at: expect.any(String),
    }])
    expect(res.body.pagination).toEqual({ page: 1, per_page: 20, total: 1, total_pages: 1 })
  })

  it("drafts every message of a thread (a person reviews them), but still skips bulk mail", async () => {
    const box = await setup({ mode: "draft" })
    const sender = recordingSender()
    await deliver(api, mail({ to: box.email, subject: "Order" }), { to: box.email })
    await deliver(api, mail({ to: box.email, subject: "Re: Order" }), { to: box.email })
    await deliver(api, mail({ to: box.email, subject: "Deals", headers: ["Precedence: bulk"] }), { to: box.email })
    await rounds(box, sender.layer)
    expect((await jobs(box)).map((j) => j.status)).toEqual(["drafted", "drafted", "skipped"])
  })
})

describe("large mail", () => {
  it("gives the AI the text of a message, and of its thread, kept in the message's file (migration 042)", async () => {
    const box = await setup({ mode: "draft" })
    const sender = recordingSender()
    // Over the blob threshold (64 KiB in tests), the text a range of the body: read from the file.
    const big = (first: string) => `${first}\r\n${"Mstari wa maelezo ya oda, bei na usafirishaji.\r\n".repeat(1_600)}`
    const first = await deliver(api, mail({ to: box.email, subject: "Order 77", body: big("Oda ya kwanza: sukari kilo 50") }), { to: box.email })
    const [stored] = await api.run(Effect.flatMap(Database, (db) =>
      db.query<{ text_body: string; text_blob: string | null }>("SELECT text_body, text_blob FROM inbound_messages WHERE id = $1", [first])
    ))
    expect(stored).toMatchObject({ text_body: "", text_blob: expect.any(String) })
    await rounds(box, sender.layer)
    const before = ai.requests.length
    await deliver(api, mail({ to: box.email, subject: "Re: Order 77", body: big("Oda ya pili: mchele kilo 20") }), { to: box.email })
    await rounds(box, sender.layer)
    expect((await jobs(box)).map((j) => j.status)).toEqual(["drafted", "drafted"])
    const messages = ai.requests[before]!.body.messages
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "user"])
    expect(messages[1]!.content).toContain("Oda ya kwanza: sukari kilo 50")
    expect(messages[2]!.content).toContain("Oda ya pili: mchele kilo 20")
  })
})

describe("skip rules end to end", () => {
  it.each([
    ["a bounce (null sender)", () => mailFixture("mail-gem/multipart_report_emails/report_530.eml"), "", "null sender (a bounce or notification)"],
    ["a MAILER-DAEMON bounce", () => mailFixture("mail-gem/multipart_report_emails/multi_address_bounce1.eml"), "mailer-daemon@lvmail01.ll.com", "MAILER-DAEMON sender"],
    ["a list post", () => mailFixture("mail-gem/error_emails/empty_in_reply_to.eml"), "ak@g.com", "mailing list (List-Id)"],
    ["junk", () => mailFixture("mail-gem/error_emails/bad_date_header.eml"), "infoz@reactive-outpost.com", "Precedence: junk"],
    ["an auto-reply", () => mail({ to: "x@inbox.localhost", headers: ["Auto-Submitted: auto-replied"] }), undefined, "Auto-Submitted: auto-replied"],
    ["bulk", () => mail({ to: "x@inbox.localhost", headers: ["Precedence: bulk"] }), undefined, "Precedence: bulk"],
    ["list precedence", () => mail({ to: "x@inbox.localhost", headers: ["Precedence: list"] }), undefined, "Precedence: list"],
    ["auto_reply precedence", () => mail({ to: "x@inbox.localhost", headers: ["Precedence: auto_reply"] }), undefined, "Precedence: auto_reply"],
    ["List-Unsubscribe", () => mail({ to: "x@inbox.localhost", headers: ["List-Unsubscribe: <mailto:u@sender.example>"] }), undefined, "bulk sender (List-Unsubscribe)"],
    ["X-Auto-Response-Suppress", () => mail({ to: "x@inbox.localhost", headers: ["X-Auto-Response-Suppress: All"] }), undefined, "the sender asked for no automatic replies (X-Auto-Response-Suppress)"],
  ])("skips %s without calling the AI or sending", async (_, raw, mailFrom, reason) => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    const before = ai.requests.length
    await deliver(api, raw(), { to: box.email, ...(mailFrom !== undefined ? { mailFrom } : {}) })
    await rounds(box, sender.layer)
    expect(ai.requests.length).toBe(before)
    expect(sender.calls).toHaveLength(0)
    expect(await jobs(box)).toMatchObject([{ status: "skipped", reason, attempt: 1, reply_text: null }])
    const listed = await api.call("GET", `/api/agent/jobs?address_id=${box.addressId}`, { token: box.account.apiKey })
    expect(listed.body.data[0]).toMatchObject({ status: "skipped", reason })
  })
})

describe("threads", () => {
  it("answers a sender once per thread in 24 h (by Clock), per thread and per sender, with the thread given to the AI", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    ai.behave({ reply: "We open at 8. A colleague will confirm Saturday." })
    await deliver(api, mail({ to: box.email, subject: "Opening hours", body: "Are you open on Saturday?" }), { to: box.email })
    const t0 = Date.now()
    await underTestClock(round([box.addressId], sender.layer), t0)
    ai.behave()

    // Same sender, same thread (Re:), 23 h later: skipped. Another thread and another sender: answered.
    await deliver(api, mail({ to: box.email, subject: "RE: opening hours", body: "And Sunday?" }), { to: box.email })
    await deliver(api, mail({ to: box.email, subject: "Delivery to Arusha" }), { to: box.email })
    await deliver(api, mail({ to: box.email, from: "Juma <juma@sender.example>", subject: "Opening hours" }), { to: box.email })
    await underTestClock(round([box.addressId], sender.layer), t0 + 23 * 3600_000)
    expect((await jobs(box)).map((j) => [j.status, j.reason])).toEqual([
      ["replied", null],
      ["skipped", "already answered this sender in this thread in the last 24 hours"],
      ["replied", null],
      ["replied", null],
    ])

    // After 24 h the thread may be answered again, and the AI sees it: earlier messages and our reply.
    const before = ai.requests.length
    await deliver(api, mail({ to: box.email, subject: "Re: Re: Opening hours", body: "Hello again, any news?" }), { to: box.email })
    await underTestClock(round([box.addressId], sender.layer), t0 + 24 * 3600_000 + 60_000)
    expect((await jobs(box)).at(-1)).toMatchObject({ status: "replied" })
    const messages = ai.requests[before]!.body.messages
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "user", "user"])
    expect(messages[1]!.content).toContain("Are you open on Saturday?")
    expect(messages[2]!.content).toBe("We open at 8. A colleague will confirm Saturday.")
    expect(messages[3]!.content).toContain("And Sunday?")
    expect(messages[4]!.content).toContain("Hello again, any news?")
    expect(sender.calls.map((c) => `${c.request.to[0]} ${c.request.subject}`).sort()).toEqual([
      "asha@sender.example Re: Delivery to Arusha",
      "asha@sender.example Re: Opening hours",
      "asha@sender.example Re: Re: Opening hours",
      "juma@sender.example Re: Opening hours",
    ])
  })

  it("never answers two messages of one thread worked in the same round", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    await deliver(api, mail({ to: box.email, subject: "Invoice 12" }), { to: box.email })
    await deliver(api, mail({ to: box.email, subject: "Re: Invoice 12" }), { to: box.email })
    await deliver(api, mail({ to: box.email, subject: "Fwd: invoice 12" }), { to: box.email })
    await rounds(box, sender.layer)
    expect(sender.calls).toHaveLength(1)
    expect((await jobs(box)).map((j) => j.status).sort()).toEqual(["replied", "skipped", "skipped"])
  })
})

describe("AI failures", () => {
  it("retries a 500 after 30 s and a 429 after 90 s more, then replies", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    ai.behave({ status: 500, fixture: "server-error" }, { status: 429, fixture: "rate-limited" }, { status: 200, fixture: "reply" })
    await deliver(api, mail({ to: box.email }), { to: box.email })
    const t0 = Date.now()
    const trace = await underTestClock(Effect.gen(function*() {
      const snaps = []
      for (const wait of [0, 29_999, 1, 89_999, 1]) {
        if (wait) yield* TestClock.adjust(`${wait} millis`)
        const taken = yield* round([box.addressId], sender.layer)
        snaps.push({ taken, job: (yield* jobsOf(box.addressId))[0]! })
      }
      return snaps
    }), t0)
    ai.behave()
    expect(trace.map((s) => s.taken)).toEqual([1, 0, 1, 0, 1])
    expect(trace[0]!.job).toMatchObject({ status: "pending", attempt: 1, reason: "the AI gateway failed (HTTP 500)" })
    expect(trace[0]!.job.next_attempt_at!.getTime()).toBe(t0 + 30_000)
    expect(trace[2]!.job).toMatchObject({ status: "pending", attempt: 2, reason: "the AI gateway failed (HTTP 429)" })
    expect(trace[2]!.job.next_attempt_at!.getTime()).toBe(t0 + 30_000 + 90_000)
    expect(trace[4]!.job).toMatchObject({ status: "replied", attempt: 3, reason: null })
    expect(sender.calls).toHaveLength(1)
  })

  it("gives up after the last attempt, and never retries a refused key", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    ai.behave({ status: 200, fixture: "empty-choices" })
    await deliver(api, mail({ to: box.email }), { to: box.email })
    const taken = await rounds(box, sender.layer, "30 seconds", "90 seconds", "270 seconds", "810 seconds", "1 hour")
    expect(taken).toEqual([1, 1, 1, 1, 1, 0])
    expect((await jobs(box))[0]).toMatchObject({ status: "failed", attempt: AGENT_MAX_ATTEMPTS, reason: "the AI gateway failed (empty answer)" })

    const refused = await setup({ mode: "auto" })
    ai.behave({ status: 401, fixture: "invalid-key" })
    const before = ai.requests.length
    await deliver(api, mail({ to: refused.email }), { to: refused.email })
    expect(await rounds(refused, sender.layer, "1 hour")).toEqual([1, 0])
    ai.behave()
    expect(ai.requests.length - before).toBe(1)
    const [job] = await jobs(refused)
    expect(job).toMatchObject({ status: "failed", attempt: 1, reason: "the AI gateway failed (HTTP 401)" })
    expect(job!.reason).not.toMatch(/sk-|Incorrect/)
    expect(sender.calls).toHaveLength(0)
  })

  it("fails at once when no AI gateway is configured", async () => {
    const bare = await makeTestApp({ workers: false, settings: { dnsServers: [dns.address] } })
    try {
      const acc = await createAccount(bare)
      await fund(bare, acc.userId, 100)
      const address = await createAddress(bare, acc.apiKey, "bare-agent")
      await bare.call("PUT", `/api/agent/configs/${address.id}`, { token: acc.apiKey, body: { mode: "draft" } })
      await deliver(bare, mail({ to: address.email }), { to: address.email })
      await bare.run(round([address.id], recordingSender().layer))
      expect(await bare.run(jobsOf(address.id))).toMatchObject([{ status: "failed", reason: "the AI gateway is not configured on this server" }])
    } finally {
      await bare.stop()
    }
  })
})

describe("outbound failures", () => {
  it("records insufficient balance as failed, with no AI call and no retry, when the wallet is empty", async () => {
    // 5 TZS pays for the inbound message; nothing is left for the reply.
    const box = await setup({ mode: "auto" }, 5)
    const sender = recordingSender()
    const before = ai.requests.length
    await deliver(api, mail({ to: box.email }), { to: box.email })
    expect(await rounds(box, sender.layer, "1 hour")).toEqual([1, 0])
    expect(ai.requests.length).toBe(before)
    expect(sender.calls).toHaveLength(0)
    expect((await jobs(box))[0]).toMatchObject({ status: "failed", attempt: 1, reason: "insufficient balance: an auto reply costs 5 TZS" })
  })

  it("records outbound's own insufficient balance (a race with other sends) as failed, not retried", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    sender.behave({ fail: noBalance() })
    await deliver(api, mail({ to: box.email }), { to: box.email })
    expect(await rounds(box, sender.layer, "1 hour")).toEqual([1, 0])
    expect(sender.calls).toHaveLength(1)
    expect((await jobs(box))[0]).toMatchObject({ status: "failed", reason: "insufficient balance: an auto reply costs 5 TZS", sending_at: null })
  })

  it("retries a provider failure with the same text (one AI call), and waits out a rate limit", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    sender.behave(
      { fail: new ProviderError({ message: "the relay failed", detail: "421 4.7.0 try later" }) },
      { fail: new RateLimited({ message: "slow down", retry_after_seconds: 1 }) },
      "sent",
    )
    const before = ai.requests.length
    await deliver(api, mail({ to: box.email }), { to: box.email })
    const t0 = Date.now()
    const trace = await underTestClock(Effect.gen(function*() {
      const out = []
      for (const wait of [0, 30_000, 2_000]) {
        if (wait) yield* TestClock.adjust(`${wait} millis`)
        out.push({ taken: yield* round([box.addressId], sender.layer), job: (yield* jobsOf(box.addressId))[0]! })
      }
      return out
      // The largest draw the random source can make: the jitter must still stay under a second.
    }).pipe(Effect.provideService(Random.Random, { nextIntUnsafe: () => Number.MAX_SAFE_INTEGER, nextDoubleUnsafe: () => 1 - Number.EPSILON })), t0)
    expect(trace[0]!.job).toMatchObject({ status: "pending", reason: "the outbound provider failed (the charge was refunded)", sending_at: null })
    expect(trace[0]!.job.next_attempt_at!.getTime()).toBe(t0 + 30_000)
    // A busy send rate does not spend an attempt.
    expect(trace[1]!.job).toMatchObject({ status: "pending", attempt: 1, reason: "outbound rate limit reached; waiting" })
    const wait = trace[1]!.job.next_attempt_at!.getTime() - (t0 + 30_000)
    expect(wait).toBeGreaterThanOrEqual(1000)
    expect(wait).toBeLessThan(2000)
    expect(trace[2]!.job).toMatchObject({ status: "replied", attempt: 2 })
    expect(ai.requests.length - before).toBe(1)
    expect(sender.calls).toHaveLength(3)
    expect(new Set(sender.calls.map((c) => c.request.text_body)).size).toBe(1)
    // The provider's text is not kept.
    expect(JSON.stringify(await jobs(box))).not.toContain("421 4.7.0")
  })

  it.each([
    [new Forbidden({ message: "sending domain duka.example is suspended, not verified" }), "the reply could not be sent: sending domain duka.example is suspended, not verified"],
    [new Suppressed({ message: "all recipients are suppressed" }), "the sender is on this account's suppression list"],
  ])("fails at once on a refusal (%s)", async (error, reason) => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    sender.behave({ fail: error })
    await deliver(api, mail({ to: box.email }), { to: box.email })
    expect(await rounds(box, sender.layer, "1 hour")).toEqual([1, 0])
    expect((await jobs(box))[0]).toMatchObject({ status: "failed", reason })
  })

  it("never sends again after an attempt was interrupted during the send", async () => {
    const box = await setup({ mode: "auto" })
    const sender = recordingSender()
    await deliver(api, mail({ to: box.email }), { to: box.email })
    // An instance died after marking the send: attempt counted, lease expired, mark left.
    await api.run(Database.use((db) =>
      db.query("UPDATE agent_jobs SET attempt = 1, sending_at = now(), reply_text = 'x', locked_until = NULL WHERE address_id = $1", [box.addressId])
    ))
    expect(await rounds(box, sender.layer, "1 hour")).toEqual([1, 0])
    expect(sender.calls).toHaveLength(0)
    expect((await jobs(box))[0]).toMatchObject({ status: "failed", attempt: 2, sending_at: null })
    expect((await jobs(box))[0]!.reason).toMatch(/^interrupted while the reply was being sent/)
  })
})

describe("with the real OutboundSender", () => {
  it("answers a burst of mail within the account's send rate (2/s): waits, spends no attempt, charges 5 TZS each", async () => {
    const box = await setup({ mode: "auto" })
    const senders = ["amani", "baraka", "chausiku", "daudi", "eliya", "fatuma"]
    for (const name of senders) {
      await deliver(api, mail({ to: box.email, from: `${name} <${name}@sender.example>`, subject: `Question from ${name}` }), { to: box.email })
    }
    const before = await balance(api, box.account.userId)
    const taken = await underTestClock(Effect.gen(function*() {
      const out: Array<number> = []
      for (let i = 0; i < 8; i++) {
        out.push(yield* round([box.addressId]))
        yield* TestClock.adjust("2 seconds")
      }
      return out
    }))
    const rows = await jobs(box)
    expect(rows.map((j) => j.status)).toEqual(senders.map(() => "replied"))
    expect(rows.every((j) => j.attempt === 1)).toBe(true)
    // All six were taken at once; the send rate made some wait for later rounds.
    expect(taken[0]).toBe(6)
    expect(taken.slice(1).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
    expect(before - (await balance(api, box.account.userId))).toBe(30)
    const sent = await api.call("GET", "/api/outbound/emails?per_page=50", { token: box.account.apiKey })
    expect(sent.body.data.map((m: { to_addresses: Array<string> }) => m.to_addresses[0]).sort()).toEqual(senders.map((n) => `${n}@sender.example`))
  })
})
