import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { hmacSha256Hex, randomHexSync } from "../../effects/shared/crypto.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { balanceOf, createTopup, eventBody, expectLedgerConsistent, postEvent, query, sign } from "./support.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(async () => {
  await expectLedgerConsistent(api)
  await api.stop()
})

const topupStatus = async (id: number) =>
  (await query<{ status: string }>(api, "SELECT status FROM topups WHERE id = $1", [id]))[0]!.status

const credits = (topupId: number) =>
  query<{ amount_tzs: number }>(
    api,
    "SELECT amount_tzs FROM ledger_entries WHERE reference_type = 'topup' AND reference_id = $1",
    [String(topupId)],
  )

const recorded = (eventId: string) =>
  query<{ outcome: string }>(api, "SELECT outcome FROM payment_events WHERE event_id = $1 ORDER BY id", [eventId]).then((rows) =>
    rows.map((r) => r.outcome)
  )

const fresh = async (amount = 5000): Promise<{ account: TestAccount; topupId: number; ref: string }> => {
  const account = await createAccount(api)
  const t = await createTopup(api, account, amount)
  return { account, topupId: t.topup.id, ref: t.provider_reference }
}

describe("POST /api/billing/payments/events: signature", () => {
  it("refuses a missing, wrong, prefixed or foreign-key signature with 401 and changes nothing", async () => {
    const { account, topupId, ref } = await fresh()
    const raw = eventBody({ id: "evt_sig_1", provider_reference: ref, amount_tzs: 5000 })
    const good = await sign(api, raw)
    const tampered = raw.replace("5000", "5001")
    const cases: Array<[string, string | null]> = [
      [raw, null],
      [raw, ""],
      [raw, "deadbeef"],
      [raw, good.slice(0, -1) + (good.endsWith("0") ? "1" : "0")],
      [raw, `sha256=${good}`],
      [tampered, good],
      [raw, await Effect.runPromise(hmacSha256Hex("another-secret", raw))],
    ]
    for (const [body, sig] of cases) {
      const res = await postEvent(api, body, sig)
      expect(res.status).toBe(401)
      expect(res.body.errors[0].code).toBe("UNAUTHORIZED")
    }
    expect(await recorded("evt_sig_1")).toEqual([])
    expect(await topupStatus(topupId)).toBe("pending")
    expect(await balanceOf(api, account)).toBe(0)
  })

  it("checks the signature before looking at the body", async () => {
    const res = await postEvent(api, "not json at all", "00")
    expect(res.status).toBe(401)
    const signed = await postEvent(api, "not json at all")
    expect(signed.status).toBe(400)
    expect(signed.body.errors[0]).toMatchObject({ field: "body", code: "VALIDATION_ERROR" })
  })

  it("accepts the signature in upper case hex", async () => {
    const { account, ref } = await fresh()
    const raw = eventBody({ provider_reference: ref, amount_tzs: 5000 })
    const res = await postEvent(api, raw, (await sign(api, raw)).toUpperCase())
    expect(res.status).toBe(200)
    expect(await balanceOf(api, account)).toBe(5000)
  })
})

describe("POST /api/billing/payments/events: transitions", () => {
  it("payment.completed completes a pending top-up and credits its amount once", async () => {
    const { account, topupId, ref } = await fresh(7000)
    const res = await postEvent(api, eventBody({ id: "evt_done_1", provider_reference: ref, amount_tzs: 7000 }))
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ event_id: "evt_done_1", outcome: "applied", topup: { id: topupId, status: "completed" } })
    expect(res.body.data.topup.completed_at).toMatch(/Z$/)
    expect(await balanceOf(api, account)).toBe(7000)
    const entries = await api.call("GET", "/api/billing/transactions", { token: account.apiKey })
    expect(entries.body.data).toEqual([
      expect.objectContaining({ kind: "credit", amount_tzs: 7000, balance_after_tzs: 7000, reference_type: "topup", reference_id: String(topupId) }),
    ])
    expect(await recorded("evt_done_1")).toEqual(["applied"])
  })

  it.each(["payment.failed", "payment.expired", "payment.voided"])("%s fails a pending top-up without money", async (event) => {
    const { account, topupId, ref } = await fresh()
    const res = await postEvent(api, eventBody({ event, provider_reference: ref, amount_tzs: 5000 }))
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ outcome: "applied", topup: { status: "failed" } })
    const [row] = await query<{ failure_reason: string }>(api, "SELECT failure_reason FROM topups WHERE id = $1", [topupId])
    expect(row!.failure_reason).toBe(event)
    expect(await balanceOf(api, account)).toBe(0)
  })

  it("moves only a pending top-up: a completed one stays completed, a failed one never completes", async () => {
    const a = await fresh()
    await postEvent(api, eventBody({ provider_reference: a.ref, amount_tzs: 5000 }))
    for (const event of ["payment.failed", "payment.completed", "payment.voided"]) {
      const res = await postEvent(api, eventBody({ id: `evt_late_${event}`, event, provider_reference: a.ref, amount_tzs: 5000 }))
      expect(res.status).toBe(200)
      expect(res.body.data).toMatchObject({ outcome: "ignored", topup: { status: "completed" } })
      expect(await recorded(`evt_late_${event}`)).toEqual(["ignored"])
    }
    expect(await balanceOf(api, a.account)).toBe(5000)

    const b = await fresh()
    await postEvent(api, eventBody({ event: "payment.expired", provider_reference: b.ref, amount_tzs: 5000 }))
    const late = await postEvent(api, eventBody({ provider_reference: b.ref, amount_tzs: 5000 }))
    expect(late.body.data).toMatchObject({ outcome: "ignored", topup: { status: "failed" } })
    expect(await topupStatus(b.topupId)).toBe("failed")
    expect(await balanceOf(api, b.account)).toBe(0)
  })
})

describe("POST /api/billing/payments/events: idempotency", () => {
  it("answers a replayed event id 200 without effect, and records every delivery", async () => {
    const { account, ref } = await fresh()
    const raw = eventBody({ id: "evt_dup_1", provider_reference: ref, amount_tzs: 5000 })
    const first = await postEvent(api, raw)
    expect(first.body.data.outcome).toBe("applied")
    for (let i = 0; i < 3; i++) {
      const again = await postEvent(api, raw)
      expect(again.status).toBe(200)
      expect(again.body.data).toMatchObject({ event_id: "evt_dup_1", outcome: "duplicate", topup: { status: "completed" } })
    }
    // The same id with another body is still the same event.
    const changed = await postEvent(api, eventBody({ id: "evt_dup_1", event: "payment.failed", provider_reference: ref, amount_tzs: 5000 }))
    expect(changed.body.data.outcome).toBe("duplicate")
    expect(await recorded("evt_dup_1")).toEqual(["applied", "duplicate", "duplicate", "duplicate", "duplicate"])
    expect(await balanceOf(api, account)).toBe(5000)
  })

  it("credits once when the same completed event arrives 20 times at once", async () => {
    const { account, topupId, ref } = await fresh(9000)
    const raw = eventBody({ id: "evt_par_1", provider_reference: ref, amount_tzs: 9000 })
    const answers = await Promise.all(Array.from({ length: 20 }, () => postEvent(api, raw)))
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
    const outcomes = answers.map((a) => a.body.data.outcome).sort()
    expect(outcomes.filter((o) => o === "applied")).toHaveLength(1)
    expect(outcomes.filter((o) => o === "duplicate")).toHaveLength(19)
    expect(await credits(topupId)).toEqual([{ amount_tzs: 9000 }])
    expect(await balanceOf(api, account)).toBe(9000)
    expect(await recorded("evt_par_1")).toHaveLength(20)
  })

  it("credits once when 20 different completed events for one top-up arrive at once", async () => {
    const { account, topupId, ref } = await fresh(4000)
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => postEvent(api, eventBody({ id: `evt_many_${i}`, provider_reference: ref, amount_tzs: 4000 }))),
    )
    expect(answers.every((a) => a.status === 200)).toBe(true)
    expect(answers.filter((a) => a.body.data.outcome === "applied")).toHaveLength(1)
    expect(await credits(topupId)).toEqual([{ amount_tzs: 4000 }])
    expect(await balanceOf(api, account)).toBe(4000)
  })

  it("credits at most once whatever the order of any set of replayed events", async () => {
    // Each round: a fresh top-up and a shuffled stream of completed/failed/expired/voided events,
    // each sent 1-3 times. The first event to arrive decides the outcome; nothing after moves it.
    const names = ["payment.completed", "payment.failed", "payment.expired", "payment.voided"]
    for (let round = 0; round < 12; round++) {
      const { account, topupId, ref } = await fresh(2000 + round)
      const events = names.flatMap((event, i) =>
        Array.from({ length: 1 + ((round + i) % 3) }, () => eventBody({ id: `evt_r${round}_${i}`, event, provider_reference: ref, amount_tzs: 2000 + round }))
      )
      // A second, distinct completed event: completion must still credit only once.
      events.push(eventBody({ id: `evt_r${round}_extra`, provider_reference: ref, amount_tzs: 2000 + round }))
      const shuffled = events.map((e) => ({ e, k: Math.random() })).sort((x, y) => x.k - y.k).map((x) => x.e)
      const firstEvent = JSON.parse(shuffled[0]!).event as string
      for (const raw of shuffled) expect((await postEvent(api, raw)).status).toBe(200)
      const completed = firstEvent === "payment.completed"
      expect(await topupStatus(topupId)).toBe(completed ? "completed" : "failed")
      expect(await credits(topupId)).toEqual(completed ? [{ amount_tzs: 2000 + round }] : [])
      expect(await balanceOf(api, account)).toBe(completed ? 2000 + round : 0)
    }
    await expectLedgerConsistent(api)
  })
})

describe("POST /api/billing/payments/events: rejected events", () => {
  it("rejects an amount mismatch with 400 on amount_tzs, records it, credits nothing; the right amount still works", async () => {
    const { account, topupId, ref } = await fresh(5000)
    for (const amount_tzs of [4999, 50000, 0, -5000]) {
      const res = await postEvent(api, eventBody({ id: `evt_amt_${amount_tzs}`, provider_reference: ref, amount_tzs }))
      expect(res.status).toBe(400)
      expect(res.body.errors[0]).toMatchObject({ field: "amount_tzs", code: "VALIDATION_ERROR" })
      expect(await recorded(`evt_amt_${amount_tzs}`)).toEqual(["amount_mismatch"])
    }
    expect(await topupStatus(topupId)).toBe("pending")
    expect(await balanceOf(api, account)).toBe(0)
    // A rejected delivery does not claim its id: the gateway's corrected retry is applied.
    const retry = await postEvent(api, eventBody({ id: "evt_amt_4999", provider_reference: ref, amount_tzs: 5000 }))
    expect(retry.body.data.outcome).toBe("applied")
    expect(await balanceOf(api, account)).toBe(5000)
  })

  it("rejects an unknown event name with 400 on event, and records it", async () => {
    const { topupId, ref } = await fresh()
    for (const event of ["payment.refunded", "PAYMENT.COMPLETED", "completed", "payment.completed "]) {
      const id = `evt_name_${randomHexSync(4)}`
      const res = await postEvent(api, eventBody({ id, event, provider_reference: ref, amount_tzs: 5000 }))
      expect(res.status).toBe(400)
      expect(res.body.errors[0]).toMatchObject({ field: "event", code: "VALIDATION_ERROR" })
      expect(await recorded(id)).toEqual(["unknown_event"])
    }
    expect(await topupStatus(topupId)).toBe("pending")
  })

  it("answers 404 for an unknown provider_reference, and records it", async () => {
    const res = await postEvent(api, eventBody({ id: "evt_unknown_ref", provider_reference: "nope_123", amount_tzs: 5000 }))
    expect(res.status).toBe(404)
    expect(res.body.errors[0].code).toBe("NOT_FOUND")
    expect(await recorded("evt_unknown_ref")).toEqual(["unknown_reference"])
    // Our own reference is not the gateway's: it does not match either.
    const { account } = await fresh()
    const [{ reference }] = (await query<{ reference: string }>(api, "SELECT reference FROM topups WHERE user_id = $1", [account.userId])) as [
      { reference: string },
    ]
    expect((await postEvent(api, eventBody({ provider_reference: reference, amount_tzs: 5000 }))).status).toBe(404)
  })

  it("refuses bodies that are not events with field errors", async () => {
    const base = { id: "evt_x", event: "payment.completed", provider_reference: "ref", amount_tzs: 5000, occurred_at: new Date().toISOString() }
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...base, id: undefined }, "id"],
      [{ ...base, id: "" }, "id"],
      [{ ...base, id: 42 }, "id"],
      [{ ...base, event: undefined }, "event"],
      [{ ...base, provider_reference: undefined }, "provider_reference"],
      [{ ...base, amount_tzs: "5000" }, "amount_tzs"],
      [{ ...base, amount_tzs: 50.5 }, "amount_tzs"],
      [{ ...base, amount_tzs: undefined }, "amount_tzs"],
      [{ ...base, occurred_at: "yesterday" }, "occurred_at"],
    ]
    for (const [body, field] of cases) {
      const res = await postEvent(api, JSON.stringify(body))
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.errors).toContainEqual(expect.objectContaining({ field, code: "VALIDATION_ERROR" }))
    }
    expect(await recorded("evt_x")).toEqual([])
  })
})
