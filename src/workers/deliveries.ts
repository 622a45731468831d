/**
 * The worker of every durable delivery queue (inbox webhooks, event endpoints, SMS, agent
 * replies): an actor over its table on the foundation's worker pattern, attempting each claimed
 * row through its capability (the deliveries through effects/deliveries/outbox.ts).
 *
 * Why it looks like this: deliveries must survive restarts and run on several instances, so
 * the queue is the table (claimed with SKIP LOCKED under a lease longer than one attempt can
 * take). Retries are due 1 s and 3 s after a failure; polling alone would add up to a poll
 * interval to each, so the instance that scheduled a retry also sets a wake-up for its due time
 * (fibers in the layer's scope, gone at shutdown; another instance still finds the row by polling).
 *
 * A delivery is one receiver's round trip, so the loop keeps `concurrency` of them in flight and
 * claims again as soon as a slot is free and there may be work (a wake-up from the commit that
 * queued it, a full last claim, the poll), instead of waiting for the slowest of a whole round:
 * a message stored while 20 deliveries are under way goes out when the first of them ends.
 * Rows an ingest commit of this instance queued already taken (inbox webhooks and event
 * endpoints, effects/deliveries/handoff.ts) come to the loop in memory and start without a claim.
 */
import { Clock, Duration, Effect, Layer, Option, Queue } from "effect"
import { type Handed, leaseFor } from "../../effects/deliveries/handoff.ts"
import type { DbError } from "../../effects/ports/Database.ts"
import { Database } from "../../effects/ports/Database.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"
import { claimDue, supervised, type WorkerSpec } from "./worker.ts"

/**
 * Sleeps until the clock reads `at` or later. A timer can end a little before the wall clock says
 * it should (Node times it from the event loop's cached time): a wake-up that came early found
 * its row not yet due, and the retry waited for the next poll, 2 s late (a CI failure).
 */
export const sleepUntil = (at: Date): Effect.Effect<void> =>
  Effect.gen(function*() {
    while (true) {
      const left = at.getTime() - Number(yield* Clock.currentTimeMillis)
      if (left <= 0) return
      yield* Effect.sleep(Duration.millis(left))
    }
  })

/** Wakes worker `queue` at a given time; the sleeping fibers belong to the caller's scope. */
export const makeWakeups = (queue: string) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const signals = yield* WorkSignals
    return (at: Date) => Effect.asVoid(Effect.forkIn(Effect.andThen(sleepUntil(at), signals.notify(queue)), scope))
  })

/**
 * At start-up, a wake-up for the earliest retry already in the table: rows scheduled by an
 * instance that stopped are then attempted on time, not a poll interval late.
 */
export const wakeForEarliest = (wakeAt: (at: Date) => Effect.Effect<void>, table: string, statuses: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const [row] = yield* db.query<{ at: Date | null }>(
      `SELECT min(next_attempt_at) AS at FROM ${table} WHERE status IN (${statuses.map((s) => `'${s}'`).join(", ")})`,
    )
    if (row?.at) yield* wakeAt(row.at)
  }).pipe(Effect.catchCause((cause) => Effect.logWarning(`${table}: cannot look up the next due row`, cause)))

export { leaseFor }

export interface DeliveryQueue<J> {
  /** Worker and WorkSignals queue name. */
  readonly name: string
  readonly table: string
  /** States whose rows still have attempts to make. */
  readonly statuses: ReadonlyArray<string>
  readonly lease: Duration.Input
  readonly concurrency: number
  /** Default 2 s; wake-ups cover scheduled retries, polling finds other instances' rows. */
  readonly pollInterval?: Duration.Input
  /** Makes the next attempt of a claimed row; returns when the following one is due, if any. */
  readonly attempt: (job: J) => Effect.Effect<Option.Option<Date>, DbError>
  /** Rows handed over by the commits that queued them (effects/deliveries/handoff.ts), attempted without a claim. */
  readonly handed?: Handed
}

/** An attempt, then `onRetry` with the following attempt's due time when one was scheduled. */
const thenRetry = (onRetry: (at: Date) => Effect.Effect<void>) => (attempt: Effect.Effect<Option.Option<Date>, DbError>) =>
  Effect.flatMap(attempt, Option.match({ onNone: () => Effect.void, onSome: onRetry }))

/** The worker's spec; tests drive it with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const deliveryWorkerSpec = <J>(queue: DeliveryQueue<J>, onRetry: (at: Date) => Effect.Effect<void> = () => Effect.void): WorkerSpec<J, Database> => ({
  name: queue.name,
  claim: claimDue<J>({ table: queue.table, dueColumn: "next_attempt_at", statuses: queue.statuses, lease: queue.lease }),
  handle: (job) => thenRetry(onRetry)(queue.attempt(job)),
  pollInterval: queue.pollInterval ?? "2 seconds",
  concurrency: queue.concurrency,
})

/**
 * The delivery loop: up to `spec.concurrency` jobs in flight, each started when a slot is free.
 * Rows handed over by the commit that queued them (`handed`) start first, without a statement.
 * The table is claimed when there may be due rows in it: at start, after a claim that filled every
 * free slot, on a wake-up (a scheduled retry, a commit that queued rows for claiming), and at
 * least every poll interval (rows of instances that stopped, retries other instances scheduled),
 * however busy the handoff keeps the loop. Jobs are children of the loop: shutting down (or a
 * crash the supervisor restarts) interrupts them, and their leases bring the rows back.
 */
export const runDeliveries = <J, R>(spec: WorkerSpec<J, R>, handed?: Handed, onRetry: (at: Date) => Effect.Effect<void> = () => Effect.void) =>
  Effect.gen(function*() {
    const signals = yield* WorkSignals
    const limit = Math.max(1, spec.concurrency ?? 4)
    const pollMs = Duration.toMillis(Duration.fromInputUnsafe(spec.pollInterval))
    // A slot freed since the loop last looked (coalesced: the loop recounts anyway).
    const freed = yield* Queue.dropping<void>(1)
    let inFlight = 0
    let claimWanted = true
    let lastClaim = -Infinity
    const run = (job: Effect.Effect<unknown, unknown, R>) => {
      inFlight++
      return Effect.forkChild(job.pipe(
        Effect.catchCause((cause) => Effect.logError(`${spec.name}: job failed`, cause)),
        Effect.ensuring(Effect.suspend(() => {
          inFlight--
          return Queue.offer(freed, undefined)
        })),
      ))
    }
    const handOn = thenRetry(onRetry)
    if (handed) yield* handed.open
    while (true) {
      const free = limit - inFlight
      if (free === 0) {
        yield* Queue.take(freed)
        continue
      }
      const given = handed ? yield* handed.take(free) : []
      for (const attempt of given) yield* run(handOn(attempt))
      const room = free - given.length
      if (room === 0) {
        yield* Queue.take(freed)
        continue
      }
      const now = Number(yield* Clock.currentTimeMillis)
      if (claimWanted || now - lastClaim >= pollMs) {
        claimWanted = false
        lastClaim = now
        const jobs = yield* spec.claim(new Date(now), room)
        for (const job of jobs) yield* run(spec.handle(job))
        if (jobs.length === room) {
          // Full: more may be due once a slot frees.
          claimWanted = true
          yield* Queue.take(freed)
          continue
        }
      }
      const wait = Duration.millis(Math.max(0, lastClaim + pollMs - Number(yield* Clock.currentTimeMillis)))
      const woke = yield* Effect.raceAll([
        Effect.as(Effect.sleep(wait), "poll" as const),
        Effect.as(signals.wait(spec.name), "signal" as const),
        ...(handed ? [Effect.as(handed.given, "handed" as const)] : []),
      ])
      if (woke === "signal") claimWanted = true
    }
  })

/** Runs the queue's worker for as long as the runtime lives. */
export const deliveryWorkerLayer = <J, E, R>(queue: Effect.Effect<DeliveryQueue<J>, E, R>) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const q = yield* queue
    const wakeAt = yield* makeWakeups(q.name)
    const spec = deliveryWorkerSpec(q, wakeAt)
    yield* wakeForEarliest(wakeAt, q.table, q.statuses)
    yield* Effect.forkScoped(supervised(spec.name, Effect.scoped(runDeliveries(spec, q.handed, wakeAt))))
  }))

/** A queue's worker: `spec` for tests (driven with `runOnce`), `layer` for the runtime. */
export const deliveryWorker = <J, E, R>(queue: Effect.Effect<DeliveryQueue<J>, E, R>) => ({
  spec: (onRetry?: (at: Date) => Effect.Effect<void>) => Effect.map(queue, (q) => deliveryWorkerSpec(q, onRetry)),
  layer: deliveryWorkerLayer(queue),
})
