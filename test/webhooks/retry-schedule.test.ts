/**
 * The one retry schedule of every durable delivery (effects/deliveries/retry.ts): 1 s, 3 s, 9 s …
 * between attempts, ending after WEBHOOK_MAX_ATTEMPTS attempts in all.
 */
import { Duration, Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import { AGENT_MAX_ATTEMPTS } from "../../effects/agent/replier.ts"
import { delayAfter, deliverySchedule, retrySchedule } from "../../effects/deliveries/retry.ts"

const delays = (maxAttempts: number, upTo: number) =>
  Effect.runPromise(Effect.forEach(Array.from({ length: upTo }, (_, i) => i + 1), (failed) =>
    Effect.map(delayAfter(deliverySchedule(maxAttempts), failed), Option.map(Duration.toMillis))))

describe("delivery schedule", () => {
  it("the documented 3 attempts: 1 s after the first failure, 3 s after the second, none after the third", async () => {
    expect(await delays(3, 4)).toEqual([Option.some(1000), Option.some(3000), Option.none(), Option.none()])
  })

  it("a longer WEBHOOK_MAX_ATTEMPTS continues ×3: 1 s, 3 s, 9 s, 27 s", async () => {
    expect(await delays(5, 5)).toEqual([Option.some(1000), Option.some(3000), Option.some(9000), Option.some(27000), Option.none()])
  })

  it("one attempt only: no retry at all", async () => {
    expect(await delays(1, 2)).toEqual([Option.none(), Option.none()])
  })

  it("nothing has failed yet: no delay", async () => {
    expect(await Effect.runPromise(delayAfter(deliverySchedule(3), 0))).toEqual(Option.none())
  })
})

describe("the same schedule from another first wait", () => {
  it("agent replies: 30 s, 90 s, 270 s, 810 s, then no attempt left after AGENT_MAX_ATTEMPTS", async () => {
    const schedule = retrySchedule("30 seconds", AGENT_MAX_ATTEMPTS)
    const got = await Effect.runPromise(Effect.forEach([1, 2, 3, 4, 5], (failed) =>
      Effect.map(delayAfter(schedule, failed), Option.map(Duration.toMillis))))
    expect(AGENT_MAX_ATTEMPTS).toBe(5)
    expect(got).toEqual([Option.some(30_000), Option.some(90_000), Option.some(270_000), Option.some(810_000), Option.none()])
  })
})
