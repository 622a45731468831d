/**
 * A rate limiter any capability can use, kept in PostgreSQL so every instance behind a load
 * balancer shares the same buckets. Each bucket is one row updated by one atomic statement
 * (GCRA, the "generic cell rate algorithm": a token bucket stored as a single timestamp), so
 * concurrent requests can never take more than the bucket holds.
 *
 * `{ limit: 10, window: "15 minutes" }` allows a burst of 10, then one more every 90 s;
 * `{ limit: 2, window: "1 second", burst: 2 }` is the outbound "2 per second, burst 2".
 * Time comes from `Clock`, so tests move it without sleeping.
 */
import { Clock, Context, Duration, Effect, Layer, Random } from "effect"
import { RateLimited } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"

export interface RateLimit {
  /** Requests replenished per `window`. */
  readonly limit: number
  readonly window: Duration.Input
  /** Requests allowed back to back from a full bucket; defaults to `limit`. */
  readonly burst?: number
}

/** The bucket after a successful take (what `RateLimit-*` headers report). */
export interface RateLimitStatus {
  readonly limit: number
  /** Requests still allowed right now. */
  readonly remaining: number
  /** Seconds until the bucket is full again. */
  readonly resetSeconds: number
}

export interface RateLimiterShape {
  /**
   * Takes `cost` (default 1) from bucket `key`, or fails RATE_LIMITED with the seconds to wait.
   * Keys are free-form; prefix them with the capability (`auth:login:ip:1.2.3.4`, `outbound:42`).
   */
  readonly take: (key: string, limit: RateLimit, cost?: number) => Effect.Effect<RateLimitStatus, RateLimited | DbError>
  /** Fills bucket `key` again (e.g. after an operator unblocks someone). */
  readonly reset: (key: string) => Effect.Effect<void, DbError>
  /** Deletes full buckets (they hold no state); returns how many. Also runs now and then by itself. */
  readonly purge: () => Effect.Effect<number, DbError>
}

/** Share of `take` calls that also purge a batch of full buckets, keeping the table small. */
const PURGE_PROBABILITY = 0.01

export class RateLimiter extends Context.Service<RateLimiter, RateLimiterShape>()("app/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const db = yield* Database

      const purge = Effect.fn("RateLimiter.purge")(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* db.query(
          `DELETE FROM rate_limits WHERE key IN (SELECT key FROM rate_limits WHERE tat_ms < $1::bigint LIMIT 1000) RETURNING key`,
          [now],
        )
        return rows.length
      })

      const take = Effect.fn("RateLimiter.take")(function*(key: string, limit: RateLimit, cost = 1) {
        const windowMs = Duration.toMillis(Duration.fromInputUnsafe(limit.window))
        const burst = limit.burst ?? limit.limit
        // Emission interval: one request's worth of time.
        const interval = Math.max(1, Math.round(windowMs / limit.limit))
        const capacity = burst * interval
        if (!(cost >= 1 && cost <= burst)) return yield* Effect.die(new Error(`RateLimiter.take: cost ${cost} outside 1..${burst}`))
        const now = yield* Clock.currentTimeMillis
        const rows = yield* db.query<{ tat_ms: number }>(
          `INSERT INTO rate_limits AS r (key, tat_ms) VALUES ($1, $2::bigint + $3::bigint)
           ON CONFLICT (key) DO UPDATE SET tat_ms = GREATEST(r.tat_ms, $2::bigint) + $3::bigint
             WHERE GREATEST(r.tat_ms, $2::bigint) + $3::bigint - $2::bigint <= $4::bigint
           RETURNING tat_ms`,
          [key, now, cost * interval, capacity],
        )
        if ((yield* Random.next) < PURGE_PROBABILITY) yield* purge()
        const taken = rows[0]
        if (taken) {
          const used = Number(taken.tat_ms) - now
          return {
            limit: burst,
            remaining: Math.max(0, Math.floor((capacity - used) / interval)),
            resetSeconds: Math.ceil(used / 1000),
          } satisfies RateLimitStatus
        }
        // Denied: read the bucket to say when `cost` will fit again (advisory, so no lock).
        const current = yield* db.query<{ tat_ms: number }>("SELECT tat_ms FROM rate_limits WHERE key = $1", [key])
        const tat = Math.max(Number(current[0]?.tat_ms ?? now), now)
        const waitMs = Math.max(1, tat + cost * interval - capacity - now)
        return yield* new RateLimited({
          message: "too many requests, retry later",
          retry_after_seconds: Math.ceil(waitMs / 1000),
          limit: burst,
          reset_seconds: Math.ceil((tat - now) / 1000),
        })
      })

      const reset = Effect.fn("RateLimiter.reset")(function*(key: string) {
        yield* db.query("DELETE FROM rate_limits WHERE key = $1", [key])
      })

      return RateLimiter.of({ take, reset, purge })
    }),
  )
}
