/**
 * The delivery loop (src/workers/deliveries.ts) with rows handed over by commits
 * (effects/deliveries/handoff.ts), under TestClock: handed attempts start without a claim, and the
 * table is still claimed on a wake-up and at least every poll interval however busy the handoff
 * keeps the loop (rows of instances that stopped, retries other instances scheduled).
 */
import { Effect, Fiber, Option, Queue } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"
import type { Handed, HandedAttempt } from "../../effects/deliveries/handoff.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"
import { runDeliveries } from "../../src/workers/deliveries.ts"
import type { WorkerSpec } from "../../src/workers/worker.ts"

/** Lets the loop's fiber run to its next wait. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow
})

const harness = Effect.gen(function*() {
  const counts = { claims: 0, handed: 0 }
  const retries: Array<number> = []
  const waiting: Array<HandedAttempt> = []
  const signal = yield* Queue.dropping<void>(1)
  const handed: Handed = {
    take: (max) => Effect.sync(() => waiting.splice(0, max)),
    given: Queue.take(signal),
    open: Effect.void,
  }
  const spec: WorkerSpec<never, never> = {
    name: "loop-test",
    claim: () => Effect.sync(() => (counts.claims++, [])),
    handle: () => Effect.void,
    pollInterval: "2 seconds",
    concurrency: 4,
  }
  const give = (next: Option.Option<Date> = Option.none()) =>
    Effect.andThen(
      Effect.sync(() => waiting.push(Effect.sync(() => (counts.handed++, next)))),
      Queue.offer(signal, undefined),
    )
  const fiber = yield* Effect.forkChild(Effect.scoped(runDeliveries(spec, handed, (at) => Effect.sync(() => void retries.push(at.getTime())))))
  yield* settle
  return { counts, retries, give, fiber }
})

const run = <A>(effect: Effect.Effect<A, never, WorkSignals>) => Effect.runPromise(effect.pipe(Effect.provide([WorkSignals.layer, TestClock.layer()])))

describe("the delivery loop with handed rows", () => {
  it("starts handed attempts without claiming, and claims every poll interval while they keep coming", async () => {
    const { counts } = await run(Effect.gen(function*() {
      const h = yield* harness
      for (let i = 0; i < 40; i++) {
        yield* h.give()
        yield* settle
        yield* TestClock.adjust("250 millis")
        yield* settle
      }
      yield* Fiber.interrupt(h.fiber)
      return h
    }))
    expect(counts.handed).toBe(40)
    // One claim at start, then one per 2 s of the 10 s: not one per handoff.
    expect(counts.claims).toBeGreaterThanOrEqual(5)
    expect(counts.claims).toBeLessThanOrEqual(6)
  })

  it("claims at once on a wake-up, and passes a handed attempt's retry time on", async () => {
    const out = await run(Effect.gen(function*() {
      const h = yield* harness
      const atStart = h.counts.claims
      yield* WorkSignals.use((s) => s.notify("loop-test"))
      yield* settle
      const afterWake = h.counts.claims
      yield* h.give(Option.some(new Date(12_345)))
      yield* settle
      yield* Fiber.interrupt(h.fiber)
      return { atStart, afterWake, retries: h.retries, counts: h.counts }
    }))
    expect(out.atStart).toBe(1)
    expect(out.afterWake).toBe(2)
    expect(out.counts).toEqual({ claims: 2, handed: 1 })
    expect(out.retries).toEqual([12_345])
  })
})
