/**
 * Deliveries handed in memory from the commit that queued them to this instance's worker.
 *
 * Why: a queued delivery otherwise waits for the worker to wake, claim it (one statement) and
 * take its attempt (another), each a round trip behind the ingest commits of a busy database,
 * before any request leaves. Accepted → webhook received at 200 msgs/s measured ~7 ms in the
 * claim and ~8 ms in the take at the median (bench/REPORT.md, MX ingest, 2026-11-27 seventh
 * session). A channel that hands off queues its rows already leased to this instance, with the
 * first attempt counted (as a take would count it, before any request), and gives them here
 * after the commit; the worker attempts them without a statement of its own before the request.
 *
 * What keeps it exactly-once per attempt, as the claimed path is:
 * - the rows are leased like claimed ones, so no other instance touches them until the lease
 *   ends, and one that dies leaves them to whoever claims them after it (the next attempt);
 * - a handed row is attempted only while most of its lease is left (`fresh`), so its request
 *   and record end inside the lease like a claimed one's; a stale one is given back (`untake`);
 * - rows handed to nobody (no worker running, or it stopped) are given back at once, and those
 *   still waiting when the worker stops too: their attempt was never started, so it is uncounted
 *   and the lease cleared, and they are claimable again at once.
 *
 * A handed row goes to its target as the queuing commit read it (URL, secret, active), as a
 * claimed one goes to its target as its take read it: a change made after that reaches the next
 * attempt. Handed rows wait milliseconds, at most a third of the lease (`fresh`).
 */
import { Clock, Duration, Effect, Option, Queue, type Scope } from "effect"
import type { DbError } from "../ports/Database.ts"

/** Handed rows waiting at most; past that, commits queue their rows for claiming as before. */
export const HANDOFF_BACKLOG = 4_096

/** A lease comfortably longer than one attempt (the transport's deadline). */
export const leaseFor = (timeout: Duration.Input): Duration.Duration =>
  Duration.max(Duration.times(Duration.fromInputUnsafe(timeout), 3), Duration.seconds(1))

/** The columns a handed row has: queued at `next_attempt_at`, leased until `locked_until`. */
export interface HandedRow {
  readonly next_attempt_at: Date | null
  readonly locked_until: Date | null
}

/**
 * Whether a handed row may still be attempted at `now`: no more than a third of its lease
 * (three attempt deadlines, `leaseFor`) spent waiting, so the attempt ends inside it.
 */
export const fresh = (row: HandedRow, now: number): boolean => {
  if (!row.next_attempt_at || !row.locked_until) return false
  const queued = row.next_attempt_at.getTime()
  return now - queued < (row.locked_until.getTime() - queued) / 3
}

/** One handed row's attempt: when the following attempt is due, if one was scheduled. */
export type HandedAttempt = Effect.Effect<Option.Option<Date>, DbError>

/** What the delivery loop sees of a handoff (src/workers/deliveries.ts). */
export interface Handed {
  /** Up to `max` handed attempts, oldest first. */
  readonly take: (max: number) => Effect.Effect<ReadonlyArray<HandedAttempt>>
  /** Waits until something was handed since it last returned (sticky: nothing handed is missed). */
  readonly given: Effect.Effect<void>
  /** The worker takes handed rows while the scope lives; at its close, those left are given back. */
  readonly open: Effect.Effect<void, never, Scope.Scope>
}

export interface Handoff<J> {
  /** Whether a commit may queue its rows taken for this instance now (a worker takes them, the backlog is short). */
  readonly accepting: () => boolean
  /** After the commit that queued `rows` taken: for the worker, or given back when none takes them. */
  readonly give: (rows: ReadonlyArray<J>) => Effect.Effect<void>
  /** The worker's side: each row's attempt (stale rows given back instead). */
  readonly handed: Handed
}

/**
 * A handoff whose rows the worker attempts with `attempt`, and whose rows nobody will attempt go
 * back with `untake` (failures logged: the rows then wait for their lease, as after a crash).
 */
export const makeHandoff = <J extends HandedRow>(options: {
  readonly name: string
  readonly attempt: (row: J) => HandedAttempt
  readonly untake: (rows: ReadonlyArray<J>) => Effect.Effect<void, unknown>
  readonly backlog?: number
}): Effect.Effect<Handoff<J>> =>
  Effect.gen(function*() {
    const backlog = options.backlog ?? HANDOFF_BACKLOG
    const waiting: Array<J> = []
    const signal = yield* Queue.dropping<void>(1)
    let open = false

    const untake = (rows: ReadonlyArray<J>) =>
      rows.length === 0 ? Effect.void : options.untake(rows).pipe(
        Effect.catchCause((cause) => Effect.logWarning(`${options.name}: cannot give back handed deliveries; they wait for their lease`, cause)),
      )

    const attemptOrGiveBack = (row: J) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => (fresh(row, Number(now)) ? options.attempt(row) : Effect.as(untake([row]), Option.none())))

    return {
      accepting: () => open && waiting.length < backlog,
      give: (rows) =>
        rows.length === 0 ? Effect.void : Effect.suspend(() => {
          if (!open) return untake(rows)
          waiting.push(...rows)
          return Effect.asVoid(Queue.offer(signal, undefined))
        }),
      handed: {
        take: (max) => Effect.sync(() => waiting.splice(0, Math.max(0, max)).map(attemptOrGiveBack)),
        given: Queue.take(signal),
        open: Effect.acquireRelease(
          Effect.sync(() => void (open = true)),
          () => Effect.suspend(() => {
            open = false
            return untake(waiting.splice(0))
          }),
        ),
      },
    } satisfies Handoff<J>
  })

/**
 * A subscriber's `stored` for a channel that hands off: inside the storing transaction, queues
 * the deliveries taken for this instance's worker when the handoff accepts them (`taken`, with
 * the time and the lease's end), else for claiming (`forClaim`, answering how many). Succeeds with
 * what to do once the transaction committed: hand them over, wake the worker, or nothing.
 */
export const queueHanded = <J extends HandedRow>(handoff: Handoff<J>, lease: Duration.Input, queue: {
  readonly taken: (at: Date, leaseEnd: Date) => Effect.Effect<ReadonlyArray<J>, DbError>
  readonly forClaim: Effect.Effect<number, DbError>
  readonly wake: Effect.Effect<void>
}): Effect.Effect<Effect.Effect<void>, DbError> =>
  Effect.gen(function*() {
    if (!handoff.accepting()) return (yield* queue.forClaim) > 0 ? queue.wake : Effect.void
    const at = Number(yield* Clock.currentTimeMillis)
    const rows = yield* queue.taken(new Date(at), new Date(at + Duration.toMillis(Duration.fromInputUnsafe(lease))))
    return handoff.give(rows)
  })
