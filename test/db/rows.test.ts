/**
 * Rows decoded at the edge (queryAs): where money and credentials are read, a row that does not
 * match its schema is a DbError naming the statement and the column (then a bare 500), never a
 * value cast into a type it does not have.
 */
import { Effect, Exit, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BalanceRow, LedgerEntry } from "../../effects/billing/schema.ts"
import { Billing } from "../../effects/billing/service.ts"
import { Database, type DatabaseShape, DbError, queryAs } from "../../effects/ports/Database.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"

/** A Database whose every query answers `rows`, as a drifted schema or a broken adapter would. */
const answering = (rows: Array<Record<string, unknown>>): DatabaseShape => ({
  dialect: "pglite",
  bytea: (n, bytes) => ({ sql: `$${n}::bytea`, value: bytes }),
  query: <T>() => Effect.succeed(rows as Array<T>),
  transaction: (effect) => effect,
  exec: () => Effect.void,
  watchWrites: () => undefined,
})

const failureOf = <A>(exit: Exit.Exit<A, DbError>): DbError => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${JSON.stringify(exit.value)}`)
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (!reason || reason._tag !== "Fail") throw new Error("expected a typed failure, got a defect")
  return reason.error
}

describe("queryAs", () => {
  it("passes rows that match through, typed by the schema", async () => {
    const rows = await Effect.runPromise(queryAs(answering([{ balance_tzs: 2500 }, { balance_tzs: 0 }]), BalanceRow, "SELECT balance_tzs FROM wallets"))
    expect(rows).toEqual([{ balance_tzs: 2500 }, { balance_tzs: 0 }])
  })

  it("fails with a DbError naming the statement and the column on a value of the wrong type", async () => {
    const exit = await Effect.runPromiseExit(queryAs(answering([{ balance_tzs: "2500" }]), BalanceRow, "SELECT balance_tzs FROM wallets WHERE user_id = $1"))
    const error = failureOf(exit)
    expect(error).toBeInstanceOf(DbError)
    expect(error.message).toContain("SELECT balance_tzs FROM wallets")
    expect(error.message).toContain("balance_tzs")
  })

  it("fails on a missing column (a rename the code did not follow), a NULL where none is allowed, and a BigInt", async () => {
    for (const bad of [{ balance: 10 }, { balance_tzs: null }, { balance_tzs: 10n }, { balance_tzs: 2.5 }]) {
      const error = failureOf(await Effect.runPromiseExit(queryAs(answering([bad]), BalanceRow, "SELECT balance_tzs FROM wallets")))
      expect(error.message).toMatch(/does not match its schema/)
    }
  })

  it("checks every row, not only the first", async () => {
    const entry = {
      id: 1,
      user_id: 1,
      kind: "credit",
      amount_tzs: 5000,
      balance_after_tzs: 5000,
      reference_type: "topup",
      reference_id: "1",
      description: "",
      created_at: new Date(),
    }
    const ok = await Effect.runPromise(queryAs(answering([entry]), LedgerEntry, "SELECT * FROM ledger_entries"))
    expect(ok[0]!.created_at).toBeInstanceOf(Date)
    const exit = await Effect.runPromiseExit(
      queryAs(answering([entry, { ...entry, id: 2, kind: "gift" }]), LedgerEntry, "SELECT * FROM ledger_entries"),
    )
    expect(failureOf(exit).message).toContain("kind")
  })

  it("takes any struct of the selected columns", async () => {
    const Row = Schema.Struct({ n: Schema.Int })
    const exit = await Effect.runPromiseExit(queryAs(answering([{ n: 1 }, { n: "x" }]), Row, "SELECT n"))
    expect(failureOf(exit).message).toContain('"n"')
  })
})

describe("decoded money on a real database", () => {
  let api: TestApp
  beforeAll(async () => {
    api = await makeTestApp({ workers: false })
  })
  afterAll(() => api.stop())

  it("a balance beyond what a number holds exactly is a 500, not a rounded amount", async () => {
    const account = await createAccount(api)
    // int8 holds it; a JavaScript number would round it silently (2^53 + 1 → 2^53).
    await api.run(Database.use((db) =>
      db.query("INSERT INTO wallets (user_id, balance_tzs) VALUES ($1, 9007199254740993)", [account.userId])
    ))
    const res = await api.call("GET", "/api/billing/balance", { token: account.apiKey })
    expect(res.status).toBe(500)
    expect(res.body.errors[0].code).toBe("INTERNAL_ERROR")
    const exit = await api.run(Effect.exit(Billing.use((b) => b.balance(account.userId))))
    expect(failureOf(exit).message).toContain("balance_tzs")
  })

  it("a balance that fits is read as before", async () => {
    const account = await createAccount(api)
    await api.run(Database.use((db) => db.query("INSERT INTO wallets (user_id, balance_tzs) VALUES ($1, 12345)", [account.userId])))
    const res = await api.call("GET", "/api/billing/balance", { token: account.apiKey })
    expect(res.status).toBe(200)
    expect(res.body.data.balance_tzs).toBe(12345)
  })
})
