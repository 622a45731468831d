/**
 * The ingest actor: one writer fiber per process owns every storing transaction. Sessions hand
 * it prepared messages through a bounded mailbox and wait; the writer takes whatever has arrived
 * (up to BATCH_MAX messages), commits it in one transaction per `batchBytesFor` its engine of
 * their bytes (./store.ts), and only then answers each waiting session, so a 250 always means
 * committed.
 * While one commit runs the next batch gathers in the mailbox, so the batch grows with the load
 * and an idle server answers at once (group commit); on PGlite a batch of a few messages first
 * waits 3 ms for company (`lingerFor`: each PGlite call's fixed cost is most of a small one's).
 *
 * A batch to addresses without follow-up work (no webhook, event endpoint, SMS rule or agent:
 * most mail) is one statement that is its own transaction (`commitAlone`); one that has such work
 * is a transaction with its subscribers' statements (`commitBatch`). Which to try is guessed from
 * what earlier commits found (./busy-addresses.ts); the statement checks and turns the batch away
 * unwritten when the guess was wrong. One round trip per batch instead of two.
 *
 * A batch never waits for messages still being prepared. It used to (up to 5 ms on PostgreSQL,
 * 20 ms on PGlite): every session then got its 250 from the same commit, all of them spoke SMTP,
 * were prepared and committed in step, and the prepare thread, the event loop and the database
 * took turns instead of working side by side (a trace under 20 reused sessions: ~14 ms
 * preparing, ~10 ms committing, each while the other idled). Committing what is ready, with the
 * prepare thread finishing jobs in arrival order (src/ingest/job-queue.ts), keeps several
 * smaller batches in the pipeline at once: 20 reused sessions on PostgreSQL 548–618 → 636–826
 * msgs/s, on PGlite 365–442 → 456–476, one message per connection unchanged (bench/REPORT.md).
 *
 * One bad message never fails its batch-mates: a batch whose transaction fails is retried
 * message by message, and only the message that fails alone is answered with the error. A
 * deadlock or serialization failure (PostgreSQL with several instances) retries the batch.
 * When the runtime shuts down, every message not yet committed is answered with an interruption
 * (a temporary 451 from the SMTP side); nothing half-stored remains.
 */
import { Context, Deferred, Effect, Exit, Layer, Queue, Schedule } from "effect"
import type { UnknownRecipient } from "../addresses/errors.ts"
import type { InsufficientBalance } from "../errors.ts"
import { Database, type DatabaseShape, type DbError } from "../ports/Database.ts"
import { freeBytes } from "../shared/free-bytes.ts"
import { MessageEvents, type StoredMessage } from "./events.ts"
import { Recipients } from "./recipients.ts"
import { batchBytesOf } from "./batch-parameters.ts"
import { busyAddresses } from "./busy-addresses.ts"
import { commitAlone, commitBatch, type Committed, type Outcome, type Prepared } from "./store.ts"

/** Messages per transaction at most. */
export const BATCH_MAX = 64
/**
 * Message bytes per transaction at most, by engine (raw MIME, parts and bodies: the blob
 * parameter; one larger message still goes alone). The blob is copied several times on its way
 * (PGlite's protocol writer grows by copying, and PostgreSQL's parameter is base64 text), and what
 * that took stayed in malloc's heap and PGlite's WebAssembly memory. 100 KiB mail over 20
 * sessions (bench/REPORT.md, MX ingest):
 * - 1 MiB against 16 MiB (2026-11-27 sixth session): PGlite peaked at 273–275 against 281–290 MiB
 *   at the same rates, PostgreSQL at 239–244 against 257–263 MiB (364–365 against 300–415 msgs/s);
 * - on PGlite 512 KiB against 1 MiB (eighth session, four interleaved pairs): 267–276 against
 *   277–285 MiB at the same rates (216–245 against 220–230 msgs/s). On PostgreSQL 512 KiB was worse
 *   every way (three pairs): 316–321 against 241–249 MiB, 230–242 against 255–266 msgs/s, 1.9
 *   against 1.5 ms of the server's CPU per message (each call's fixed cost over fewer messages).
 * 2 KiB mail fills no batch that far.
 */
export const batchBytesFor = (dialect: DatabaseShape["dialect"]): number => (dialect === "pglite" ? 512 * 1024 : 1024 * 1024)

/** Consecutive groups of at most `cap` bytes, in order; an item larger than `cap` is a group of its own. */
export const bySize = <A>(items: ReadonlyArray<A>, bytesOf: (item: A) => number, cap: number): Array<Array<A>> => {
  const groups: Array<Array<A>> = []
  let bytes = Infinity
  for (const item of items) {
    if (bytes + bytesOf(item) > cap) {
      groups.push([])
      bytes = 0
    }
    groups[groups.length - 1]!.push(item)
    bytes += bytesOf(item)
  }
  return groups
}

/** Messages waiting for the writer at most; a full mailbox makes sessions wait (backpressure). */
export const MAILBOX_CAPACITY = 1_024

export type WriteError = UnknownRecipient | InsufficientBalance | DbError

interface Job {
  readonly prepared: Prepared
  readonly done: Deferred.Deferred<ReadonlyArray<StoredMessage>, WriteError>
}

export interface IngestWriterShape {
  /** Stores and charges the message in the next batch; succeeds once that batch committed. */
  readonly submit: (prepared: Prepared) => Effect.Effect<ReadonlyArray<StoredMessage>, WriteError>
}

/**
 * How long a small batch (under LINGER_BELOW messages) waits for company before it commits, by
 * engine. A PGlite call's fixed cost is most of it for a few messages (bench/ingest-call.ts: 1.65
 * ms a call at one message, 3.10 at three, 3.42 at eight), and under one message per connection
 * the writer kept committing batches of one or two. Waiting 3 ms against not waiting, eight
 * pairs in alternating order (bench/REPORT.md, MX ingest, twenty-third session): 2 KiB over 20
 * reused sessions 1,040 → 1,135 msgs/s at 1.205 → 1.10 ms of CPU a message, but one message per
 * connection 971.5 → 893 msgs/s (the twenty-second session's pairs, which ran the wait second,
 * showed it faster for both). Kept while both PGlite lines are met with it; the one-message
 * cost is not understood yet. A lone message on an idle PGlite server is answered 3 ms later.
 * On PostgreSQL waits were slower (fifteenth session) or no faster (twenty-third): none there.
 */
export const lingerFor = (dialect: DatabaseShape["dialect"]): number => (dialect === "pglite" ? 3 : 0)
export const LINGER_BELOW = 4

/** Made once: a schedule built per commit (its duration parsed each time) cost ~30 µs a batch. */
const RETRY = Schedule.exponential("5 millis")

/** SQLSTATEs worth another try of the same batch. */
const transient = (e: DbError) => e.code === "40P01" || e.code === "40001"

/**
 * Builds a writer in the caller's scope: its fiber lives until the scope closes. `lingerMs`: how
 * long a small batch waits for company (tests; else the engine's `lingerFor`).
 */
export const makeIngestWriter = (options: { readonly lingerMs?: number } = {}) => Effect.gen(function*() {
  const db = yield* Database
  const events = yield* MessageEvents
  const recipients = yield* Recipients
  const mailbox = yield* Queue.bounded<Job>(MAILBOX_CAPACITY)

  const busy = busyAddresses()

  /**
   * One statement when no address of the batch has follow-up work (most mail), else a transaction
   * with the subscribers' statements; a batch the statement turned away goes the second way.
   */
  const commitOnce = (batch: ReadonlyArray<Prepared>): Effect.Effect<Committed, DbError> => {
    const withSubscribers = Effect.tap(db.transaction(commitBatch(db, events, batch)), (done) => Effect.sync(() => busy.learn(batch, done.quiet)))
    if (!busy.quiet(batch)) return withSubscribers
    return Effect.flatMap(commitAlone(db, batch), (done) => {
      if (done) return Effect.succeed(done)
      busy.learn(batch, false)
      return withSubscribers
    })
  }

  const commit = (jobs: ReadonlyArray<Job>) =>
    Effect.suspend(() => {
      const asOf = recipients.version()
      return Effect.map(commitOnce(jobs.map((j) => j.prepared)), (done) => ({ ...done, asOf }))
    }).pipe(
      Effect.retry({ while: transient, schedule: RETRY, times: 3 }),
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

  /** The messages' bytes of a batch travel as one parameter: at most the engine's cap of them per commit. */
  const batchBytes = batchBytesFor(db.dialect)
  const bytesOf = (job: Job) => batchBytesOf(job.prepared.message)

  // Whatever happens to a batch (a defect, an interruption at shutdown), no sender waits forever.
  // Then, every sender answered and no retry left, the messages' bytes and rows are freed (or
  // PGlite's thread, which keeps them, is told it may).
  const settle = (jobs: ReadonlyArray<Job>) =>
    Effect.forEach(jobs, (job) => Deferred.interrupt(job.done), { discard: true }).pipe(
      Effect.andThen(Effect.sync(() => {
        for (const { prepared: { message } } of jobs) {
          if ("kept" in message) message.release()
          else {
            freeBytes(message.bytes)
            freeBytes(message.row)
          }
        }
      })),
    )

  const lingerMs = options.lingerMs ?? lingerFor(db.dialect)
  /** A small batch after `lingerMs`, with whatever came meanwhile added to it (up to BATCH_MAX). */
  const withCompany = (jobs: Array<Job>) =>
    Effect.andThen(
      Effect.sleep(lingerMs),
      Effect.sync(() => {
        while (jobs.length < BATCH_MAX) {
          const more = Queue.takeUnsafe(mailbox)
          if (!more || !Exit.isSuccess(more)) break
          jobs.push(more.value)
        }
        return jobs
      }),
    )

  yield* Effect.forkScoped(Effect.forever(
    Effect.gen(function*() {
      const jobs = yield* Queue.takeBetween(mailbox, 1, BATCH_MAX)
      // Settled whatever happens from here, the wait for company included (it adds to `jobs`).
      yield* (lingerMs > 0 && jobs.length < LINGER_BELOW ? withCompany(jobs) : Effect.succeed(jobs)).pipe(
        Effect.flatMap((batch) => Effect.forEach(bySize(batch, bytesOf, batchBytes), (group) => write(group), { discard: true })),
        Effect.ensuring(settle(jobs)),
      )
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

  return IngestWriter.of({ submit })
})

export class IngestWriter extends Context.Service<IngestWriter, IngestWriterShape>()("app/IngestWriter") {
  static readonly layer = Layer.effect(IngestWriter, makeIngestWriter())
}
