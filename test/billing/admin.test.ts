import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { commands } from "../../src/admin/index.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { balanceOf, expectLedgerConsistent } from "./support.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(async () => {
  await expectLedgerConsistent(api)
  await api.stop()
})

const credit = commands.find((c) => c.name === "credit")!
const run = (args: Array<string>, flags: Record<string, string>) => api.run(Effect.result(credit.run(args, flags)))

describe("operator CLI: credit ID AMOUNT --reason TEXT", () => {
  it("adds an adjustment entry with the reason, visible in the customer's transactions", async () => {
    const account = await createAccount(api)
    const result = await run([String(account.userId), "2500"], { reason: "goodwill for outage #12" })
    expect(result._tag).toBe("Success")
    expect(await balanceOf(api, account)).toBe(2500)
    const tx = await api.call("GET", "/api/billing/transactions", { token: account.apiKey })
    expect(tx.body.data).toEqual([
      expect.objectContaining({ kind: "adjustment", amount_tzs: 2500, reference_type: "operator", description: "goodwill for outage #12" }),
    ])
  })

  it("refuses bad ids, amounts, a missing reason and unknown accounts, writing nothing", async () => {
    const account = await createAccount(api)
    const bad: Array<[Array<string>, Record<string, string>]> = [
      [[String(account.userId), "100"], {}],
      [[String(account.userId), "100"], { reason: "  " }],
      [[String(account.userId), "-100"], { reason: "x" }],
      [[String(account.userId), "0"], { reason: "x" }],
      [[String(account.userId), "12.5"], { reason: "x" }],
      [[String(account.userId), "lots"], { reason: "x" }],
      [[String(account.userId)], { reason: "x" }],
      [["abc", "100"], { reason: "x" }],
      [["99999999", "100"], { reason: "x" }],
    ]
    for (const [args, flags] of bad) {
      const result = await run(args, flags)
      expect(result._tag, JSON.stringify(args)).toBe("Failure")
    }
    expect(await balanceOf(api, account)).toBe(0)
  })
})

describe("ledger guard", () => {
  it("the database refuses a second credit of the same top-up", async () => {
    const account = await createAccount(api)
    const second = await api.run(Effect.gen(function*() {
      const billing = yield* Billing
      const m = { userId: account.userId, amount: 2000, kind: "credit" as const, reference: { type: "topup", id: 424242 } }
      yield* billing.credit(m)
      return yield* Effect.flip(billing.credit(m))
    }))
    expect(second).toMatchObject({ _tag: "DbError", code: "23505" })
    expect(await balanceOf(api, account)).toBe(2000)
  })
})
