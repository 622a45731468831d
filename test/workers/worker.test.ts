/**
 * The worker pattern (src/workers/worker.ts) on a throwaway queue table: retry timing under
 * TestClock, lease expiry, supervision after a crash, and concurrent claimers never sharing a row.
 */
import { Clock, Duration, Effect, Fiber, Option, Queue } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"
import { delayAfter, deliverySchedule } from "../../effects/deliveries/retry.ts"
import { claimDue, runOnce, runWorker, supervised, type WorkerSpec } from "../../src/workers/worker.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
  await api.run(Database.use((db) =>
    db.exec(`CREATE TABLE test_jobs (
      id bigserial PRIMARY KEY,
      queue text NOT NULL,
      status text NOT NULL DEFAULT 'pending',
      attempt integer NOT NULL DEFAULT 0,
      attempted_at bigint[] NOT NULL DEFAULT '{}',
      next_attempt_at timestamptz NOT NULL,
      locked_until timestamptz
    )`)
  ))
})
afterAll(() => api.stop())

interface Job {
  readonly id: number
  readonly attempt: number
}

const MAX_ATTEMPTS = 3

/**
 * Where the loop is (real time passes in its database I/O even under a TestClock): `busy` while
 * a round claims and handles, `rounds` counts the rounds that ended. After a round ends the loop
 * goes straight to its sleep, with no more I/O.
 */
interface Progress {
  busy: boolean
  rounds: number
}

/** A queue whose handler always fails and reschedules with the real delivery schedule. */
const failingSpec = (queue: string, seen?: Queue.Queue<number>, progress?: Progress): WorkerSpec<Job, Database> => {
  const claim = claimDue<Job>({ table: "test_jobs", dueColumn: "next_attempt_at", statuses: ["pending", "retrying"], lease: "30 seconds" })
  const ended = () => {
    if (!progress) return
    progress.busy = false
    progress.rounds++
  }
  return {
    name: queue,
    pollInterval: "250 millis",
    claim: (now, limit) =>
      Effect.suspend(() => {
        if (progress) progress.busy = true
        return Effect.map(claim(now, limit), (rows) => {
          const mine = rows.filter((r: any) => r.queue === queue)
          if (mine.length === 0) ended()
          return mine
        })
      }),
    handle: (job) =>
      Effect.gen(function*() {
        const db = yield* Database
        const now = Number(yield* Clock.currentTimeMillis)
        const attempt = job.attempt + 1
        const delay = yield* delayAfter(deliverySchedule(MAX_ATTEMPTS), attempt)
        yield* db.query(
          `UPDATE test_jobs SET attempt = $2, attempted_at = attempted_at || $3::bigint, locked_until = NULL,
             status = $4, next_attempt_at = $5 WHERE id = $1`,
          [job.id, attempt, now, Option.isNone(delay) ? "failed" : "retrying", new Date(now + Option.match(delay, { onNone: () => 0, onSome: Duration.toMillis }))],
        )
        if (seen) yield* Queue.offer(seen, attempt)
        ended()
      }),
  }
}

const insertJob = (queue: string, dueAt: number) =>
  Effect.gen(function*() {
    const db = yield* Database
    const [row] = yield* db.query<{ id: number }>(
      "INSERT INTO test_jobs (queue, next_attempt_at) VALUES ($1, $2) RETURNING id",
      [queue, new Date(dueAt)],
    )
    return row!.id
  })

const attemptsOf = (id: number) =>
  Database.use((db) => db.query<{ attempted_at: Array<number>; status: string }>("SELECT attempted_at, status FROM test_jobs WHERE id = $1", [id]))
    .pipe(Effect.map((rows) => ({ at: rows[0]!.attempted_at.map(Number), status: rows[0]!.status })))

describe("worker pattern", () => {
  it("retries at 1 s then 3 s after failures, then stops (TestClock)", async () => {
    const result = await api.run(Effect.gen(function*() {
      const spec = failingSpec("timing")
      yield* TestClock.setTime(1_000_000)
      const id = yield* insertJob("timing", 1_000_000)
      const ran: Array<number> = []
      // Step the clock 250 ms at a time, as the loop's poll would, for 20 s.
      for (let t = 0; t <= 20_000; t += 250) {
        if ((yield* runOnce(spec)) > 0) ran.push(t)
        yield* TestClock.adjust("250 millis")
      }
      return { ran, ...(yield* attemptsOf(id)) }
    }).pipe(Effect.provide(TestClock.layer())))
    expect(result.ran).toEqual([0, 1000, 4000])
    expect(result.at.map((t) => t - 1_000_000)).toEqual([0, 1000, 4000])
    expect(result.status).toBe("failed")
  })

  it("runs the real loop: a signal wakes it, the clock drives retries", async () => {
    const result = await api.run(Effect.gen(function*() {
      const seen = yield* Queue.unbounded<number>()
      const signals = yield* WorkSignals
      yield* TestClock.setTime(2_000_000)
      const id = yield* insertJob("loop", 2_000_000)
      const progress: Progress = { busy: false, rounds: 0 }
      // Real time, while the loop's database I/O runs (at most 10 s).
      const until = (done: () => boolean) =>
        TestClock.withLive(Effect.gen(function*() {
          while (!done()) yield* Effect.sleep("2 millis")
        }).pipe(Effect.timeout("10 seconds"), Effect.orDie))
      const asleep = Effect.andThen(until(() => !progress.busy), TestClock.withLive(Effect.sleep("5 millis")))
      const fiber = yield* Effect.forkChild(runWorker(failingSpec("loop", seen, progress)))
      // Its first round takes the due job at once.
      expect(yield* Queue.take(seen)).toBe(1)
      // Asleep until the next poll, a signal wakes it for another round with the clock unmoved.
      yield* asleep
      const woken = progress.rounds
      yield* signals.notify("loop")
      yield* until(() => progress.rounds > woken)
      // Move the clock one poll interval at a time, as a real clock would: each step only once
      // the loop is asleep again (its round over, then a moment to reach the sleep), and the next
      // only once the round this step woke has ended. However slow the database, no step is lost.
      const advance = (ms: number) =>
        Effect.gen(function*() {
          for (let t = 0; t < ms; t += 250) {
            yield* asleep
            const before = progress.rounds
            yield* TestClock.adjust("250 millis")
            yield* until(() => progress.rounds > before)
          }
        })
      yield* advance(1000)
      expect(yield* Queue.take(seen)).toBe(2)
      yield* advance(3000)
      expect(yield* Queue.take(seen)).toBe(3)
      yield* Fiber.interrupt(fiber)
      return yield* attemptsOf(id)
    }).pipe(Effect.provide(TestClock.layer())))
    expect(result.at.map((t) => t - 2_000_000)).toEqual([0, 1000, 4000])
  })

  it("does not hand a leased row out again until its lease expires", async () => {
    const taken = await api.run(Effect.gen(function*() {
      yield* TestClock.setTime(3_000_000)
      yield* insertJob("lease", 3_000_000)
      const spec = failingSpec("lease")
      // A claimer that "crashes": claims but never records an outcome.
      const first = yield* spec.claim(new Date(3_000_000), 10)
      const again = yield* spec.claim(new Date(3_000_000 + 29_000), 10)
      const afterLease = yield* spec.claim(new Date(3_000_000 + 30_000), 10)
      return [first.length, again.length, afterLease.length]
    }).pipe(Effect.provide(TestClock.layer())))
    expect(taken).toEqual([1, 0, 1])
  })

  it("restarts a crashed loop after a backoff", async () => {
    const handled = await api.run(Effect.gen(function*() {
      yield* TestClock.setTime(4_000_000)
      yield* insertJob("crash", 4_000_000)
      const seen = yield* Queue.unbounded<number>()
      const base = failingSpec("crash", seen)
      let claims = 0
      const flaky: WorkerSpec<Job, Database> = {
        ...base,
        claim: (now, limit) => (++claims === 1 ? Effect.die(new Error("claim blew up")) : base.claim(now, limit)),
      }
      const fiber = yield* Effect.forkChild(supervised("crash", runWorker(flaky)))
      yield* TestClock.withLive(Effect.sleep("100 millis"))
      yield* TestClock.adjust("1 second")
      const attempt = yield* Queue.take(seen)
      yield* Fiber.interrupt(fiber)
      return { attempt, claims }
    }).pipe(Effect.provide(TestClock.layer())))
    expect(handled.attempt).toBe(1)
    expect(handled.claims).toBeGreaterThanOrEqual(2)
  })

  it("never gives the same row to two concurrent claimers", async () => {
    const claimed = await api.run(Effect.gen(function*() {
      const now = 5_000_000
      for (let i = 0; i < 40; i++) yield* insertJob("race", now)
      const spec = failingSpec("race")
      const batches = yield* Effect.all(
        Array.from({ length: 8 }, () => spec.claim(new Date(now), 10)),
        { concurrency: "unbounded" },
      )
      return batches.flatMap((b) => b.map((j) => j.id))
    }))
    expect(claimed).toHaveLength(40)
    expect(new Set(claimed).size).toBe(40)
  })
})
