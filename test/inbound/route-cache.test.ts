/**
 * What the RCPT check keeps (effects/ingest/recipients.ts): a busy address is not looked up again
 * for every RCPT, but any change made through this process counts on the very next RCPT (an
 * address deleted, a wallet credited), an unknown recipient is never kept (a new address gets
 * mail at once), and after a commit the check starts from the balance the commit left.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeRouteCache } from "../../effects/ingest/route-cache.ts"
import { endTransaction, newSessionState, onRecipient } from "../../src/smtp/session.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { loggedTestDatabase } from "../support/db.ts"
import { createAddress, fund, plainMessage } from "../support/inbound.ts"
import { sendRaw } from "../support/smtp-client.ts"

/** Statements run through the Database port. */
const statements: Array<string> = []
let app: TestApp
beforeAll(async () => {
  app = await makeTestApp({ workers: false, database: loggedTestDatabase(statements) })
})
afterAll(() => app.stop())

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}`
const lookups = () => statements.filter((s) => s.includes("ingest_lookup")).length

/** One RCPT in a transaction of its own: the SMTP reply code (250 when admitted). */
const rcpt = async (to: string) => {
  const state = newSessionState()
  const r = await app.run(Effect.result(onRecipient(state, to)))
  await app.run(endTransaction(state))
  return r._tag === "Success" ? 250 : r.failure.code
}

const mx = () => app.ports.mx!

describe("the RCPT check", () => {
  it("asks the database once for a busy address, not for every RCPT", async () => {
    const a = await createAccount(app)
    await fund(app, a.userId, 100)
    const box = await createAddress(app, a.apiKey, unique("busy"))
    const before = lookups()
    expect(await Promise.all([1, 2, 3, 4, 5].map(() => rcpt(box.email)))).toEqual([250, 250, 250, 250, 250])
    expect(await rcpt(box.email)).toBe(250)
    expect(lookups() - before).toBe(1)
  })

  it("refuses a deleted address on the very next RCPT", async () => {
    const a = await createAccount(app)
    await fund(app, a.userId, 100)
    const box = await createAddress(app, a.apiKey, unique("gone"))
    expect((await sendRaw(mx(), { from: "a@sender.example", to: [box.email], raw: plainMessage() })).data?.code).toBe(250)
    expect(await rcpt(box.email)).toBe(250)
    expect((await app.call("DELETE", `/api/inbound/addresses/${box.id}`, { token: a.apiKey })).status).toBe(200)
    expect(await rcpt(box.email)).toBe(550)
  })

  it("admits mail on the very next RCPT after a wallet is credited", async () => {
    const a = await createAccount(app)
    const box = await createAddress(app, a.apiKey, unique("broke"))
    expect(await rcpt(box.email)).toBe(452)
    await fund(app, a.userId, 5)
    expect(await rcpt(box.email)).toBe(250)
  })

  it("never keeps an unknown recipient: an address created a moment later gets its mail", async () => {
    const a = await createAccount(app)
    await fund(app, a.userId, 100)
    const local = unique("soon")
    const email = `${local}@${app.settings.platformDomain}`
    expect(await rcpt(email)).toBe(550)
    await createAddress(app, a.apiKey, local)
    expect(await rcpt(email)).toBe(250)
  })

  it("starts from the balance a commit left, not from the one it looked up", async () => {
    const a = await createAccount(app)
    await fund(app, a.userId, 10)
    const box = await createAddress(app, a.apiKey, unique("two"))
    expect(await rcpt(box.email)).toBe(250)
    const sent = await sendRaw(mx(), { from: "a@sender.example", to: [box.email], raw: plainMessage() })
    expect(sent.data?.code).toBe(250)
    expect((await sendRaw(mx(), { from: "a@sender.example", to: [box.email], raw: plainMessage() })).data?.code).toBe(250)
    // The wallet is empty now, whatever the lookup before the two commits said.
    const before = lookups()
    expect(await rcpt(box.email)).toBe(452)
    expect(lookups()).toBe(before)
  })
})

describe("what RCPT lookups keep", () => {
  const row = (id: number, userId = 1, balance = 100) => ({ id, user_id: userId, balance })

  it("stays within its bound however many spellings a sender tries, dropping the oldest", () => {
    const kept = makeRouteCache<ReturnType<typeof row>>(3)
    for (let i = 0; i < 1000; i++) kept.keep(`info+${i}@inbox.localhost`, row(7), 1_000)
    expect(kept.size()).toBe(3)
    expect(kept.get("info+996@inbox.localhost", 0)).toBeUndefined()
    expect(kept.get("info+999@inbox.localhost", 0)).toEqual({ row: row(7), balance: 100 })
    // Kept again, a spelling is the newest: the next one in pushes out another.
    kept.keep("info+997@inbox.localhost", row(7), 1_000)
    kept.keep("other@inbox.localhost", row(8), 1_000)
    expect(kept.get("info+997@inbox.localhost", 0)).toBeDefined()
    expect(kept.get("info+998@inbox.localhost", 0)).toBeUndefined()
  })

  it("answers only while both the route and the balance are fresh; a commit extends both", () => {
    const kept = makeRouteCache<ReturnType<typeof row>>(10)
    kept.keep("a@inbox.localhost", row(1, 1, 50), 100)
    expect(kept.get("a@inbox.localhost", 99)).toEqual({ row: row(1, 1, 50), balance: 50 })
    expect(kept.get("a@inbox.localhost", 100)).toBeUndefined()
    kept.settle([{ userId: 1, balance: 45 }], [1], 200)
    expect(kept.get("a@inbox.localhost", 150)).toEqual({ row: row(1, 1, 50), balance: 45 })
    kept.clear()
    expect(kept.get("a@inbox.localhost", 150)).toBeUndefined()
    expect(kept.size()).toBe(0)
  })
})
