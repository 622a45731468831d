/**
 * The one retry schedule of durable work: each wait three times the one before, from a first
 * wait, for at most a number of attempts. Deliveries (inbox webhooks, event endpoints, SMS) wait
 * 1 s, 3 s, 9 s … for at most WEBHOOK_MAX_ATTEMPTS attempts (SPEC.md "Webhook deliveries",
 * DECISIONS.md "Webhooks"); agent replies 30 s, 90 s, 270 s … (effects/agent/replier.ts).
 *
 * The attempts themselves are rows in the database (they must survive restarts), so the
 * schedule is not run with `Effect.retry`: it is stepped to read the delay that follows the
 * n-th failure, and its end is what says "no attempt left".
 */
import { Duration, Effect, Option, Pull, Schedule } from "effect"

/** `maxAttempts` attempts: the first at once, then one after each of `maxAttempts - 1` waits from `first` up, tripling. */
export const retrySchedule = (first: Duration.Input, maxAttempts: number): Schedule.Schedule<Duration.Duration> =>
  Schedule.exponential(first, 3).pipe(Schedule.upTo({ times: Math.max(0, maxAttempts - 1) }))

/** Deliveries: 1 s, 3 s, 9 s … */
export const deliverySchedule = (maxAttempts: number): Schedule.Schedule<Duration.Duration> => retrySchedule("1 second", maxAttempts)

/**
 * The wait before the attempt that follows `failed` failed attempts, or none when the schedule
 * is used up (the delivery has failed for good).
 */
export const delayAfter = (
  schedule: Schedule.Schedule<Duration.Duration>,
  failed: number,
): Effect.Effect<Option.Option<Duration.Duration>> =>
  Effect.gen(function*() {
    const step = yield* Schedule.toStep(schedule)
    let delay = Option.none<Duration.Duration>()
    for (let i = 0; i < failed; i++) {
      delay = yield* step(0, undefined).pipe(
        Effect.map(([, d]) => Option.some(d)),
        Pull.catchDone(() => Effect.succeed(Option.none<Duration.Duration>())),
      )
      if (Option.isNone(delay)) break
    }
    return delay
  })
