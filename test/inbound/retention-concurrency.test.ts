/**
 * The retention purge and inbound storage at the same time, on the same addresses. Ingest locks
 * the address rows in id order; the purge used to update them in whatever order its join
 * produced, so on PostgreSQL a purge and a delivery could each hold an address the other waited
 * for, and one failed with a deadlock (40P01): mail refused with 451, or a purge round lost.
 * PGlite runs one transaction at a time, so the race exists only on a server; the test runs on
 * both and proves the invariants either way.
 */
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Ingest } from "../../effects/ingest/service.ts"
import { retentionWorker } from "../../src/workers/retention.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { createAccount } from "../support/accounts.ts"
import { onPostgres } from "../support/db.ts"
import { createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const ADDRESSES = 24
const DELIVERIES = onPostgres ? 60 : 6
const IN_FLIGHT = 6

/** One purge round with the clock a year ahead: every message stored so far counts as expired. */
const purgeAll = () =>
  app.api.run(
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now() + 400 * 86_400_000)
      return yield* runOnce(retentionWorker("1 hour"))
    }).pipe(Effect.provide(TestClock.layer())),
  )

describe("retention purge under concurrent inbound mail", () => {
  it("never deadlocks with deliveries to the same addresses, and the counters stay exact", { timeout: 120_000 }, async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 1_000_000)
    const addresses: Array<{ email: string }> = []
    for (let i = 0; i < ADDRESSES; i++) addresses.push(await createAddress(app.api, apiKey, `ret-${i}-${process.pid}`))
    // Every delivery reaches all addresses, listed in a shuffled order (ingest sorts before locking).
    const recipients = () => [...addresses.map((a) => a.email)].sort(() => Math.random() - 0.5)
    const deliver = () =>
      app.api.run(Ingest.use((i) =>
        i.deliver({
          raw: Buffer.from(plainMessage({ to: addresses[0]!.email })),
          mailFrom: "alice@sender.example",
          recipients: recipients(),
          client: { ip: "127.0.0.1", helo: "sender.example" },
        })
      ))

    const failures: Array<unknown> = []
    let delivering = true
    // Two purge loops run back to back for as long as mail arrives, so purges and deliveries
    // overlap all the time (and the two purges race each other, as two instances would).
    const purgeLoop = async () => {
      let rounds = 0
      while (delivering) {
        await purgeAll().catch((e: unknown) => failures.push(e))
        rounds++
      }
      return rounds
    }
    const loops = [purgeLoop(), purgeLoop()]
    for (let sent = 0; sent < DELIVERIES; sent += IN_FLIGHT) {
      const wave = await Promise.allSettled(Array.from({ length: IN_FLIGHT }, () => deliver()))
      for (const r of wave) if (r.status === "rejected") failures.push(r.reason)
    }
    delivering = false
    const rounds = await Promise.all(loops)
    expect(failures.map(String)).toEqual([])
    expect(rounds[0]! + rounds[1]!).toBeGreaterThan(2)

    // Whatever interleaving happened: counters equal the rows, every MIME row is referenced, and
    // the wallet paid exactly for the copies stored.
    const [counts] = await query<{ rows: number; counted: number; unread: number }>(
      app.api,
      `SELECT (SELECT count(*) FROM inbound_messages WHERE user_id = $1)::int8 AS rows,
              (SELECT sum(message_count) FROM inbound_addresses WHERE user_id = $1)::int8 AS counted,
              (SELECT sum(unread_count) FROM inbound_addresses WHERE user_id = $1)::int8 AS unread`,
      [userId],
    )
    expect(counts!.counted).toBe(counts!.rows)
    expect(counts!.unread).toBe(counts!.rows)
    const [refs] = await query<{ bad: number }>(
      app.api,
      `SELECT count(*)::int8 AS bad FROM inbound_mime m
        WHERE m.user_id = $1 AND m.message_refs <> (SELECT count(*) FROM inbound_messages x WHERE x.mime_id = m.id)`,
      [userId],
    )
    expect(refs!.bad).toBe(0)
    const [delivered] = await query<{ n: number }>(
      app.api,
      "SELECT count(*)::int8 AS n FROM ledger_entries WHERE user_id = $1 AND reference_type = 'inbound_message'",
      [userId],
    )
    expect(delivered!.n).toBe(Math.ceil(DELIVERIES / IN_FLIGHT) * IN_FLIGHT * ADDRESSES)
  })
})
