/**
 * The worker pattern every long-lived fiber uses. A worker is an actor over a durable queue
 * table: it claims due rows with `FOR UPDATE SKIP LOCKED` (so several instances can share a
 * queue without taking the same row), leases them with `locked_until` (so a crashed instance's
 * rows come back after the lease), hands each to its handler, and sleeps until the next poll or
 * a wake-up signal. The handler records the outcome (done, or next attempt at a later time).
 *
 * Supervision: a defect in a handler or the loop is logged and the loop restarts after a
 * backoff (Schedule), so one bad row cannot stop delivery for everyone. The fiber belongs to the
 * Layer's scope, so shutting the runtime down interrupts it cleanly.
 */
import { Clock, Duration, Effect, Layer, Schedule } from "effect"
import { Database, type DbError } from "../../effects/ports/Database.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"

/** `R`: the services claiming and handling need; the worker's Layer requires them. */
export interface WorkerSpec<J, R = never> {
  /** Also the WorkSignals queue name. */
  readonly name: string
  /** Claims up to `limit` due jobs at `now` (see `claimDueSql`). */
  readonly claim: (now: Date, limit: number) => Effect.Effect<ReadonlyArray<J>, DbError, R>
  /** Handles one claimed job and records its outcome. Failures are logged; the lease then expires. */
  readonly handle: (job: J) => Effect.Effect<void, unknown, R>
  readonly pollInterval: Duration.Input
  readonly batchSize?: number
  /** Jobs handled at once (webhook POSTs wait on the network, so >1 helps). */
  readonly concurrency?: number
}

/** One claim-and-handle round; returns how many jobs it took. Exposed for tests. */
export const runOnce = <J, R>(spec: WorkerSpec<J, R>) =>
  Effect.gen(function*() {
    const now = new Date(Number(yield* Clock.currentTimeMillis))
    const jobs = yield* spec.claim(now, spec.batchSize ?? 20)
    yield* Effect.forEach(
      jobs,
      (job) =>
        spec.handle(job).pipe(
          Effect.catchCause((cause) => Effect.logError(`${spec.name}: job failed`, cause)),
        ),
      { concurrency: spec.concurrency ?? 4, discard: true },
    )
    return jobs.length
  })

/** The loop: drain due work, then wait for the poll interval or a signal. Never returns. */
export const runWorker = <J, R>(spec: WorkerSpec<J, R>) =>
  Effect.gen(function*() {
    const signals = yield* WorkSignals
    while (true) {
      const taken = yield* runOnce(spec)
      // A full batch means more may be due: go again at once.
      if (taken >= (spec.batchSize ?? 20)) continue
      yield* Effect.race(Effect.sleep(spec.pollInterval), signals.wait(spec.name))
    }
  })

/** Restarts the loop after any failure or defect, backing off 1 s, 2 s, 4 s … capped at 30 s. */
export const supervised = <A, E, R>(name: string, loop: Effect.Effect<A, E, R>) =>
  loop.pipe(
    Effect.tapCause((cause) => Effect.logError(`${name}: worker crashed, restarting`, cause)),
    Effect.catchDefect((defect) => Effect.fail(defect)),
    Effect.retry(Schedule.min([Schedule.exponential("1 second", 2), Schedule.spaced("30 seconds")])),
  )

/** A Layer that runs the worker for as long as the runtime lives. */
export const workerLayer = <J, R>(spec: WorkerSpec<J, R>) =>
  Layer.effectDiscard(Effect.forkScoped(supervised(spec.name, runWorker(spec))))

/**
 * The standard claim for a queue table with columns `status`, `locked_until` and a due-time
 * column: takes due rows in order, skipping rows another instance holds, and leases them.
 * Parameters: $1 now, $2 lease end, $3 limit.
 */
export const claimDueSql = (options: {
  readonly table: string
  readonly dueColumn: string
  readonly statuses: ReadonlyArray<string>
}) =>
  `UPDATE ${options.table} SET locked_until = $2
     WHERE id IN (
       SELECT id FROM ${options.table}
        WHERE status IN (${options.statuses.map((s) => `'${s}'`).join(", ")})
          AND ${options.dueColumn} <= $1
          AND (locked_until IS NULL OR locked_until <= $1)
        ORDER BY ${options.dueColumn}, id
        LIMIT $3
        FOR UPDATE SKIP LOCKED)
   RETURNING *`

/** Claims with `claimDueSql` through the Database port. */
export const claimDue = <J>(options: Parameters<typeof claimDueSql>[0] & { readonly lease: Duration.Input }) => {
  const sql = claimDueSql(options)
  const leaseMs = Duration.toMillis(Duration.fromInputUnsafe(options.lease))
  return (now: Date, limit: number) =>
    Effect.gen(function*() {
      const db = yield* Database
      return yield* db.query<J>(sql, [now, new Date(now.getTime() + leaseMs), limit])
    })
}

