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
 */
import { Clock, Duration, Effect, Layer, Option, Queue } from "effect"
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

/** A lease comfortably longer than one attempt (the transport's deadline). */
export const leaseFor = (timeout: Duration.Input): Duration.Duration =>
  Duration.max(Duration.times(Duration.fromInputUnsafe(timeout), 3), Duration.seconds(1))

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
}

/** The worker's spec; tests drive it with `runOnce`. `onRetry` hears when a scheduled retry is due. */
export const deliveryWorkerSpec = <J>(queue: DeliveryQueue<J>, onRetry: (at: Date) => Effect.Effect<void> = () => Effect.void): WorkerSpec<J, Database> => ({
  name: queue.name,
  claim: claimDue<J>({ table: queue.table, dueColumn: "next_attempt_at", statuses: queue.statuses, lease: queue.lease }),
  handle: (job) => Effect.flatMap(queue.attempt(job), Option.match({ onNone: () => Effect.void, onSome: onRetry })),
  pollInterval: queue.pollInterval ?? "2 seconds",
  concurrency: queue.concurrency,
})

/**
 * The delivery loop: up to `spec.concurrency` jobs in flight, each claimed when a slot is free.
 * After a claim that filled every free slot it waits for one to free (more may be due); after one
 * that found less, for a wake-up or the poll. Jobs are children of the loop: shutting down (or a
 * crash the supervisor restarts) interrupts them, and their leases bring the rows back.
 */
export const runDeliveries = <J, R>(spec: WorkerSpec<J, R>) =>
  Effect.gen(function*() {
    const signals = yield* WorkSignals
    const limit = Math.max(1, spec.concurrency ?? 4)
    // A slot freed since the loop last looked (coalesced: the loop recounts anyway).
    const freed = yield* Queue.dropping<void>(1)
    let inFlight = 0
    const handle = (job: J) =>
      spec.handle(job).pipe(
        Effect.catchCause((cause) => Effect.logError(`${spec.name}: job failed`, cause)),
        Effect.ensuring(Effect.suspend(() => {
          inFlight--
          return Queue.offer(freed, undefined)
        })),
      )
    while (true) {
      const free = limit - inFlight
      if (free === 0) {
        yield* Queue.take(freed)
        continue
      }
      const now = new Date(Number(yield* Clock.currentTimeMillis))
      const jobs = yield* spec.claim(now, free)
      inFlight += jobs.length
      for (const job of jobs) yield* Effect.forkChild(handle(job))
      if (jobs.length === free) yield* Queue.take(freed)
      else yield* Effect.race(Effect.sleep(spec.pollInterval), signals.wait(spec.name))
    }
  })

/** Runs the queue's worker for as long as the runtime lives. */
export const deliveryWorkerLayer = <J, E, R>(queue: Effect.Effect<DeliveryQueue<J>, E, R>) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const q = yield* queue
    const wakeAt = yield* makeWakeups(q.name)
    const spec = deliveryWorkerSpec(q, wakeAt)
    yield* wakeForEarliest(wakeAt, q.table, q.statuses)
    yield* Effect.forkScoped(supervised(spec.name, runDeliveries(spec)))
  }))

/** A queue's worker: `spec` for tests (driven with `runOnce`), `layer` for the runtime. */
export const deliveryWorker = <J, E, R>(queue: Effect.Effect<DeliveryQueue<J>, E, R>) => ({
  spec: (onRetry?: (at: Date) => Effect.Effect<void>) => Effect.map(queue, (q) => deliveryWorkerSpec(q, onRetry)),
  layer: deliveryWorkerLayer(queue),
})
