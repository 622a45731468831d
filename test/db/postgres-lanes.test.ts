/**
 * The PostgreSQL adapter's lanes on a real server (src/db/postgres.ts, src/db/statement-lanes.ts):
 * statements outside transactions pipeline onto the lanes' connections, a slow one sends the
 * rest to the pool instead of holding them up, and a lane whose connection dies connects again.
 */
import { describe, expect, it } from "vitest"
import { LANE_MAX_PARAMETER_BYTES, openPostgres } from "../../src/db/postgres.ts"
import { onPostgres, testDatabaseUrl } from "../support/db.ts"

const pidOf = async (source: ReturnType<typeof openPostgres>["source"]) =>
  Number((await source.query("SELECT pg_backend_pid() AS pid"))[0]!.pid)

describe.skipIf(!onPostgres)("statement lanes on PostgreSQL", () => {
  it("runs concurrent statements on the lanes' connections only", async () => {
    const db = openPostgres({ url: testDatabaseUrl!, max: 6, lanes: 2, laneOptions: { stallMs: 60_000, queueMs: 60_000 } })
    try {
      // Two at once: one per lane (each connects on its first statement).
      const lanePids = new Set(await Promise.all([pidOf(db.source), pidOf(db.source)]))
      expect(lanePids.size).toBe(2)
      const pids = await Promise.all(Array.from({ length: 40 }, () => pidOf(db.source)))
      expect(new Set(pids)).toEqual(lanePids)
      // Transactions take pool connections, never a lane's.
      const reserved = await db.source.reserve()
      const txPid = Number((await reserved.connection.query("SELECT pg_backend_pid() AS pid"))[0]!.pid)
      await reserved.release()
      expect(lanePids.has(txPid)).toBe(false)
    } finally {
      await db.close()
    }
  })

  it("sends a statement with large parameters to the pool, never a lane", async () => {
    const db = openPostgres({ url: testDatabaseUrl!, max: 4, lanes: 1, laneOptions: { stallMs: 60_000, queueMs: 60_000 } })
    try {
      const lanePid = await pidOf(db.source)
      const small = await db.source.query("SELECT pg_backend_pid() AS pid, length($1::text) AS n", ["x".repeat(LANE_MAX_PARAMETER_BYTES)])
      expect(Number(small[0]!.pid)).toBe(lanePid)
      const large = await db.source.query("SELECT pg_backend_pid() AS pid, length($1::text) AS n", ["x".repeat(LANE_MAX_PARAMETER_BYTES + 1)])
      expect(Number(large[0]!.n)).toBe(LANE_MAX_PARAMETER_BYTES + 1)
      expect(Number(large[0]!.pid)).not.toBe(lanePid)
    } finally {
      await db.close()
    }
  })

  it("sends statements to the pool while a lane's oldest statement is slow", async () => {
    const db = openPostgres({ url: testDatabaseUrl!, max: 4, lanes: 1, laneOptions: { stallMs: 50, queueMs: 60_000 } })
    try {
      const lanePid = await pidOf(db.source)
      const done: Array<string> = []
      const slow = db.source.query("SELECT pg_backend_pid() AS pid, pg_sleep(1)").then((rows) => (done.push("slow"), Number(rows[0]!.pid)))
      await new Promise((r) => setTimeout(r, 150))
      const quick = await Promise.all(Array.from({ length: 5 }, () => pidOf(db.source).then((pid) => (done.push("quick"), pid))))
      expect(await slow).toBe(lanePid)
      expect(done).toEqual(["quick", "quick", "quick", "quick", "quick", "slow"])
      expect(quick.includes(lanePid)).toBe(false)
    } finally {
      await db.close()
    }
  })

  it("connects a lane again after its server process is terminated", async () => {
    const db = openPostgres({ url: testDatabaseUrl!, max: 3, lanes: 1 })
    const admin = openPostgres({ url: testDatabaseUrl!, max: 1 })
    try {
      const before = await pidOf(db.source)
      await admin.source.query("SELECT pg_terminate_backend($1)", [before])
      await new Promise((r) => setTimeout(r, 200))
      const after = await pidOf(db.source)
      expect(after).not.toBe(before)
      expect(await pidOf(db.source)).toBe(after)
    } finally {
      await db.close()
      await admin.close()
    }
  })
})
