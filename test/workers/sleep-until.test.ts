/**
 * A scheduled retry's wake-up (src/workers/deliveries.ts `sleepUntil`) ends only once the clock
 * reads its due time, even when a timer ends early: an early wake-up found its row not yet due and
 * the retry waited for the next poll (a CI failure: 5 s after the previous attempt instead of 3).
 */
import { Clock, Duration, Effect } from "effect"
import { describe, expect, it } from "vitest"
import { sleepUntil } from "../../src/workers/deliveries.ts"

/** A clock whose timers end `early` ms before the time they were asked for. */
const earlyClock = (start: number, early: number) => {
  let now = start
  const sleeps: Array<number> = []
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => now,
    currentTimeMillis: Effect.sync(() => now),
    currentTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    monotonicTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep: (d) =>
      Effect.sync(() => {
        const ms = Duration.toMillis(d)
        sleeps.push(ms)
        now += Math.max(1, ms - early)
      }),
  }
  return { clock, now: () => now, sleeps }
}

describe("sleepUntil", () => {
  it("ends at or after the due time when timers end early", async () => {
    const c = earlyClock(1_000_000, 5)
    await Effect.runPromise(Effect.provideService(sleepUntil(new Date(1_003_000)), Clock.Clock, c.clock))
    expect(c.now()).toBeGreaterThanOrEqual(1_003_000)
    // The first timer ended 5 ms early; the rest was slept again.
    expect(c.sleeps[0]).toBe(3000)
    expect(c.sleeps.length).toBeGreaterThan(1)
  })

  it("does not sleep for a time already past", async () => {
    const c = earlyClock(1_000_000, 0)
    await Effect.runPromise(Effect.provideService(sleepUntil(new Date(999_000)), Clock.Clock, c.clock))
    expect(c.sleeps).toEqual([])
  })
})
