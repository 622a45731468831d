/**
 * Why the suite runs twice. The concurrency tests (200 parallel charges against one balance,
 * the address/domain caps under parallel creates, idempotency twins, the send rate limiter and
 * auth buckets, refresh-token reuse races, queue leases, two instances sharing the webhook
 * queue) prove something only where transactions really overlap. PGlite runs one transaction at
 * a time, so there they pass trivially; CI runs the whole suite again with TEST_DATABASE_URL
 * (.ci/run), where they meet real concurrency. These two tests pin that premise: if the
 * PostgreSQL run ever stopped overlapping transactions (a pool of one, a global lock in the
 * adapter), the concurrency tests would pass without proving anything, and this one fails.
 */
import { Deferred, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { onPostgres } from "../support/db.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(() => api.stop())

/**
 * Transaction A starts and waits for `gate`; transaction B, started beside it (not inside it),
 * opens the gate when it commits. Answers whether A was still open when B committed.
 */
const overlapping = Database.use((db) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<void>()
    const started = yield* Deferred.make<void>()
    const events: Array<string> = []
    const a = db.transaction(Effect.gen(function*() {
      yield* db.query("SELECT txid_current()")
      yield* Deferred.succeed(started, undefined)
      const opened = yield* Deferred.await(gate).pipe(Effect.timeoutOption("1500 millis"))
      events.push(opened._tag === "Some" ? "a saw b commit" : "a gave up waiting")
    }))
    const b = Effect.gen(function*() {
      yield* Deferred.await(started)
      yield* db.transaction(db.query("SELECT txid_current()"))
      events.push("b committed")
      yield* Deferred.succeed(gate, undefined)
    })
    yield* Effect.all([a, b], { concurrency: 2 })
    return events
  })
)

describe("transactions in the test database", () => {
  it.skipIf(!onPostgres)("overlap on PostgreSQL, so the concurrency tests meet real concurrency", async () => {
    expect(await api.run(overlapping)).toEqual(["b committed", "a saw b commit"])
  })

  it.skipIf(onPostgres)("run one at a time on PGlite (why those tests must also run on PostgreSQL)", async () => {
    expect(await api.run(overlapping)).toEqual(["a gave up waiting", "b committed"])
  })
})
