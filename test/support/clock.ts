/**
 * A clock for the whole test app that runs in real time plus an offset the test moves:
 * `clock.advance("11 minutes")` makes every service (token expiry, OTP lifetime, rate-limit
 * windows) see the future at once, without sleeping. Sleeps still use real timers, so
 * timeouts and workers behave normally. `freeze()` stops it (only `advance` moves it then) for
 * tests that count milliseconds. Pass `clock.layer` in `makeTestApp({ infrastructure })`.
 */
import { Clock, Duration, Effect, Layer } from "effect"

export interface ShiftedClock {
  readonly layer: Layer.Layer<never>
  readonly advance: (by: Duration.Input) => void
  readonly now: () => number
  /** Stops the clock at its current time until `thaw()`. */
  readonly freeze: () => void
  readonly thaw: () => void
}

export const shiftedClock = (): ShiftedClock => {
  let offset = 0
  let frozenAt: number | undefined
  const now = () => frozenAt ?? Date.now() + offset
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: now,
    currentTimeMillis: Effect.sync(now),
    currentTimeNanosUnsafe: () => BigInt(now()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now()) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => process.hrtime.bigint(),
    monotonicTimeNanos: Effect.sync(() => process.hrtime.bigint()),
    sleep: (duration) =>
      Effect.callback<void>((resume) => {
        const timer = setTimeout(() => resume(Effect.void), Duration.toMillis(duration))
        return Effect.sync(() => clearTimeout(timer))
      }),
  }
  return {
    layer: Layer.succeed(Clock.Clock, clock),
    advance: (by) => {
      const ms = Duration.toMillis(Duration.fromInputUnsafe(by))
      offset += ms
      if (frozenAt !== undefined) frozenAt += ms
    },
    now,
    freeze: () => {
      frozenAt = now()
    },
    thaw: () => {
      if (frozenAt !== undefined) offset = frozenAt - Date.now()
      frozenAt = undefined
    },
  }
}
