/**
 * The ingest actor: one writer fiber per process owns every storing transaction. Sessions hand
 * it prepared messages through a bounded mailbox and wait; the writer takes whatever has arrived
 * (up to BATCH_MAX messages, BATCH_BYTES of them per transaction), commits it in one transaction
 * (./store.ts), and only then answers each
 * waiting session, so a 250 always means committed. While one commit runs the next batch
 * gathers, so the batch grows with the load and an idle server answers at once (group commit).
 *
 * A commit costs the same few milliseconds for one message as for twenty (PGlite runs it on the
 * event loop; PostgreSQL adds round trips), so a batch also waits, at most GATHER_MS (by engine)
 * and only while it holds less than GATHER_BYTES, for the messages that sessions are preparing
 * (authenticating, parsing) right now. Measured under 20
 * busy sessions on PGlite, batches were ~5 messages without it: most of each message's database
 * CPU was the per-commit part. A lone message (nothing else on its way) is committed at once.
 *
 * One bad message never fails its batch-mates: a batch whose transaction fails is retried
 * message by message, and only the message that fails alone is answered with the error. A
 * deadlock or serialization failure (PostgreSQL with several instances) retries the batch.
 * When the runtime shuts down, every message not yet committed is answered with an interruption
 * (a temporary 451 from the SMTP side); nothing half-stored remains.
 */
import { Context, Deferred, Effect, Exit, Layer, Option, Queue, Schedule } from "effect"
import type { UnknownRecipient } from "../addresses/errors.ts"
import type { InsufficientBalance } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { MessageEvents, type StoredMessage } from "./events.ts"
import { Recipients } from "./recipients.ts"
import { commitBatch, type Outcome, type Prepared } from "./store.ts"

/** Messages per transaction at most. */
export const BATCH_MAX = 64
/** Message bytes per transaction at most (one large message still goes alone). */
export const BATCH_BYTES = 16 * 1024 * 1024
/** Messages waiting for the writer at most; a full mailbox makes sessions wait (backpressure). */
export const MAILBOX_CAPACITY = 1_024
/**
 * How long a batch waits at most for messages still being prepared, by engine. PGlite commits
 * on the event loop, so each commit's fixed cost competes with the sessions and fewer, larger
 * batches win; a PostgreSQL commit runs in the server, and a short wait answers sooner. Measured
 * warm (2 KiB, bench/REPORT.md): PostgreSQL 5 ms against 20 ms, 1,351 vs 1,196 msgs/s over 20
 * reused sessions and 1,169 vs 1,010 with one message per connection; PGlite 1,018 vs 1,060 and
 * 825 vs 833 (CPU per message 1.15 vs 1.09 ms).
 */
export const GATHER_MS = { pglite: 20, postgres: 5 } as const
/**
 * A batch stops waiting for messages still being prepared once it holds this many bytes: then the
 * per-message work (moving and storing the bytes) outweighs the commit's fixed cost, and waiting
 * only makes preparing and committing take turns. Measured with 100 KiB messages over 20 sessions
 * on PostgreSQL: 182–199 msgs/s waiting for all, 199–241 with this bound (bench/REPORT.md).
 */
export const GATHER_BYTES = 256 * 1024
const bytesOf = (jobs: ReadonlyArray<Job>) => jobs.reduce((n, j) => n + j.prepared.message.size, 0)

export type WriteError = UnknownRecipient | InsufficientBalance | DbError

interface Job {
  readonly prepared: Prepared
  readonly done: Deferred.Deferred<ReadonlyArray<StoredMessage>, WriteError>
}

export interface IngestWriterShape {
  /** Stores and charges the message in the next batch; succeeds once that batch committed. */
  readonly submit: (prepared: Prepared) => Effect.Effect<ReadonlyArray<StoredMessage>, WriteError>
  /**
   * Prepares a message and submits it: from the start of `prepare` until the message is in the
   * mailbox it counts as on its way, and a batch starting meanwhile waits for it.
   */
  readonly store: <E, R>(prepare: Effect.Effect<Prepared, E, R>) => Effect.Effect<ReadonlyArray<StoredMessage>, E | WriteError, R>
}

/** SQLSTATEs worth another try of the same batch. */
const transient = (e: DbError) => e.code === "40P01" || e.code === "40001"

/**
 * Builds a writer in the caller's scope: its fiber lives until the scope closes. `gatherMs`: how
 * long a batch waits for messages being prepared (tests hold it open longer than a loaded machine
 * can stall); `gatherBytes`: how many bytes a batch holds before it stops waiting.
 */
export const makeIngestWriter = (options: { readonly gatherMs?: number; readonly gatherBytes?: number } = {}) =>
  Effect.gen(function*() {
    const db = yield* Database
    const gatherMs = options.gatherMs ?? GATHER_MS[db.dialect]
    const events = yield* MessageEvents
    const recipients = yield* Recipients
    const mailbox = yield* Queue.bounded<Job>(MAILBOX_CAPACITY)

    const commit = (jobs: ReadonlyArray<Job>) =>
      Effect.suspend(() => {
        const asOf = recipients.version()
        return Effect.map(db.transaction(commitBatch(db, events, jobs.map((j) => j.prepared))), (done) => ({ ...done, asOf }))
      }).pipe(
        Effect.retry({ while: transient, schedule: Schedule.exponential("5 millis"), times: 3 }),
        Effect.exit,
      )

    const answer = (job: Job, outcome: Outcome) =>
      outcome._tag === "Stored" ? Deferred.succeed(job.done, outcome.messages) : Deferred.fail(job.done, outcome.error)

    /** Commits `jobs` together, or one by one when together fails. */
    const write: (jobs: ReadonlyArray<Job>) => Effect.Effect<void> = Effect.fnUntraced(function*(jobs: ReadonlyArray<Job>) {
      const exit = yield* commit(jobs)
      if (Exit.isSuccess(exit)) {
        // Before any sender hears back: its next RCPT starts from what this commit left.
        const stored = exit.value.outcomes.flatMap((o) => (o._tag === "Stored" ? o.messages.map((m) => m.addressId) : []))
        recipients.remember(exit.value.balances, stored, exit.value.asOf)
        yield* Effect.forEach(jobs, (job, i) => answer(job, exit.value.outcomes[i]!), { discard: true })
        // Wake the workers of whatever was queued (the webhook worker among them) right at commit.
        return yield* exit.value.afterCommit
      }
      if (jobs.length > 1) {
        yield* Effect.logWarning("ingest: a batch failed, committing its messages one by one", exit.cause)
        return yield* Effect.forEach(jobs, (job) => write([job]), { discard: true })
      }
      yield* Effect.logError("ingest: a message could not be stored", exit.cause)
      yield* Deferred.done(jobs[0]!.done, exit as Exit.Exit<never, WriteError>)
    })

    /** Consecutive groups of at most BATCH_BYTES (the rows of a batch travel as one parameter). */
    const bySize = (jobs: ReadonlyArray<Job>) => {
      const groups: Array<Array<Job>> = []
      let bytes = Infinity
      for (const job of jobs) {
        if (bytes + job.prepared.message.size > BATCH_BYTES) {
          groups.push([])
          bytes = 0
        }
        groups[groups.length - 1]!.push(job)
        bytes += job.prepared.message.size
      }
      return groups
    }

    // Whatever happens to a batch (a defect, an interruption at shutdown), no sender waits forever.
    const settle = (jobs: ReadonlyArray<Job>) => Effect.forEach(jobs, (job) => Deferred.interrupt(job.done), { discard: true })

    /** Messages being prepared for the mailbox now (counted until they are in it). */
    let onTheWay = 0
    /**
     * Adds to `jobs` what arrives while messages are on their way, for at most `gatherMs`. The
     * bound is a latency cap on the process's own monotonic time, not a business time (a test
     * clock that stands still must not make the writer wait longer).
     */
    const gather = Effect.fnUntraced(function*(jobs: Array<Job>) {
      const until = performance.now() + gatherMs
      while (jobs.length < BATCH_MAX) {
        // What is already in the mailbox joins at once (it may have arrived just as a wait ended).
        if ((yield* Queue.size(mailbox)) > 0) {
          jobs.push(...(yield* Queue.takeBetween(mailbox, 1, BATCH_MAX - jobs.length)))
          continue
        }
        const left = until - performance.now()
        if (onTheWay === 0 || left <= 0 || bytesOf(jobs) >= (options.gatherBytes ?? GATHER_BYTES)) break
        const more = yield* Queue.takeBetween(mailbox, 1, BATCH_MAX - jobs.length).pipe(
          Effect.timeoutOption(Math.min(left, 2)),
        )
        if (Option.isSome(more)) jobs.push(...more.value)
      }
      return jobs
    })

    yield* Effect.forkScoped(Effect.forever(
      Effect.gen(function*() {
        const jobs = yield* gather([...(yield* Queue.takeBetween(mailbox, 1, BATCH_MAX))])
        yield* Effect.forEach(bySize(jobs), (group) => write(group), { discard: true }).pipe(Effect.ensuring(settle(jobs)))
      }),
    ))
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        const left = yield* Queue.clear(mailbox).pipe(Effect.orElseSucceed(() => [] as Array<Job>))
        yield* Queue.shutdown(mailbox)
        yield* settle(left)
      })
    )

    const enqueue = Effect.fnUntraced(function*(prepared: Prepared) {
      const done = yield* Deferred.make<ReadonlyArray<StoredMessage>, WriteError>()
      yield* Queue.offer(mailbox, { prepared, done })
      return done
    })

    const submit = (prepared: Prepared) => Effect.flatMap(enqueue(prepared), Deferred.await)

    const store = <E, R>(prepare: Effect.Effect<Prepared, E, R>) =>
      Effect.suspend(() => {
        // Uncounted only once it is in the mailbox (or failed): never "nothing on its way" while
        // it is not there yet.
        onTheWay++
        return Effect.flatMap(
          Effect.onExit(Effect.flatMap(prepare, enqueue), () => Effect.sync(() => void onTheWay--)),
          Deferred.await,
        )
      })

    return IngestWriter.of({ submit, store })
  })

export class IngestWriter extends Context.Service<IngestWriter, IngestWriterShape>()("app/IngestWriter") {
  static readonly layer = Layer.effect(IngestWriter, makeIngestWriter())
}
