import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { Database } from "../../effects/ports/Database.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(() => api.stop())

const ledgerSum = (userId: number) =>
  api.run(Effect.gen(function*() {
    const db = yield* Database
    const [row] = yield* db.query<{ s: number }>("SELECT COALESCE(sum(amount_tzs), 0)::int8 AS s FROM ledger_entries WHERE user_id = $1", [userId])
    return row!.s
  }))

describe("Billing ledger", () => {
  it("credits, charges and refunds, keeping balance = ledger sum", async () => {
    const { userId } = await createAccount(api)
    const balance = await api.run(Effect.gen(function*() {
      const billing = yield* Billing
      expect(yield* billing.balance(userId)).toBe(0)
      yield* billing.credit({ userId, amount: 2000, kind: "credit", reference: { type: "topup", id: 1 } })
      const debit = yield* billing.charge({ userId, amount: 5, reference: { type: "outbound_message", id: 9 } })
      expect(debit).toMatchObject({ kind: "debit", amount_tzs: -5, balance_after_tzs: 1995, reference_id: "9" })
      yield* billing.refund({ userId, amount: 5, reference: { type: "outbound_message", id: 9 } })
      return yield* billing.balance(userId)
    }))
    expect(balance).toBe(2000)
    expect(await ledgerSum(userId)).toBe(2000)
  })

  it("refuses a charge the wallet cannot cover and writes nothing", async () => {
    const { userId } = await createAccount(api)
    const result = await api.run(Effect.gen(function*() {
      const billing = yield* Billing
      yield* billing.credit({ userId, amount: 3, kind: "adjustment", reference: { type: "operator" } })
      return yield* Effect.flip(billing.charge({ userId, amount: 5, reference: { type: "inbound_message", id: 1 } }))
    }))
    expect(result._tag).toBe("InsufficientBalance")
    expect(result).toMatchObject({ required_tzs: 5, balance_tzs: 3 })
    expect(await ledgerSum(userId)).toBe(3)
  })

  it("rolls a charge back with the surrounding transaction", async () => {
    const { userId } = await createAccount(api)
    await api.run(Effect.gen(function*() {
      const billing = yield* Billing
      const db = yield* Database
      yield* billing.credit({ userId, amount: 100, kind: "credit", reference: { type: "topup" } })
      const failed = yield* Effect.flip(db.transaction(Effect.gen(function*() {
        yield* billing.charge({ userId, amount: 5, reference: { type: "inbound_message" } })
        return yield* Effect.fail("later step failed" as const)
      })))
      expect(failed).toBe("later step failed")
      expect(yield* billing.balance(userId)).toBe(100)
    }))
    expect(await ledgerSum(userId)).toBe(100)
  })

  it("rejects non-positive and fractional amounts", async () => {
    const { userId } = await createAccount(api)
    for (const amount of [0, -5, 2.5, Number.NaN]) {
      const e = await api.run(Effect.flip(Billing.use((b) => b.charge({ userId, amount, reference: { type: "x" } }))))
      expect(e._tag).toBe("ValidationError")
    }
  })

  it("lets exactly 50 of 200 concurrent charges through a balance that covers 50", async () => {
    const { userId } = await createAccount(api)
    const outcomes = await api.run(Effect.gen(function*() {
      const billing = yield* Billing
      yield* billing.credit({ userId, amount: 250, kind: "credit", reference: { type: "topup" } })
      return yield* Effect.all(
        Array.from({ length: 200 }, (_, i) =>
          Effect.result(billing.charge({ userId, amount: 5, reference: { type: "outbound_message", id: i } }))),
        { concurrency: "unbounded" },
      )
    }))
    expect(outcomes.filter((o) => o._tag === "Success")).toHaveLength(50)
    expect(outcomes.filter((o) => o._tag === "Failure").every((o) => o._tag === "Failure" && o.failure._tag === "InsufficientBalance")).toBe(true)
    const balance = await api.run(Billing.use((b) => b.balance(userId)))
    expect(balance).toBe(0)
    expect(await ledgerSum(userId)).toBe(0)
  })
})
