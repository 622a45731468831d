/**
 * The one delivery machine behind inbox webhooks, account event endpoints and SMS
 * notifications. Each is a queue table of delivery rows written in the transaction of the fact
 * that caused them (outbox), claimed by a worker under a lease (src/workers/deliveries.ts), and
 * attempted here. A channel only says which tables it uses and how one attempt is made.
 *
 * Exactly-once per attempt: an attempt is taken (attempt + 1) by a statement conditional on the
 * worker's lease before any request is made, and its outcome is recorded under the same
 * condition. An instance that crashes mid-request has spent that attempt; whoever claims the row
 * after the lease makes the next one, never the same one again. Retries follow the one
 * delivery schedule (retry.ts) capped at WEBHOOK_MAX_ATTEMPTS.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { AppConfig } from "../config.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { delayAfter, deliverySchedule } from "./retry.ts"

/** Extra columns a channel sets with an outcome (`status_code`, `delivered_at`, `sent_at` …). */
export type Fields = Readonly<Record<string, unknown>>

/** What one attempt ended as. */
export type AttemptOutcome =
  | { readonly _tag: "Delivered"; readonly fields: Fields }
  | {
    readonly _tag: "Failed"
    /** Single-line `last_error`. */
    readonly error: string
    /** False when another attempt cannot help (a refused target, a rejected request). */
    readonly retryable: boolean
    readonly fields: Fields
    /** The receiver said the endpoint is gone for good (410): stop sending to it at all. */
    readonly deactivate?: boolean
  }

export const delivered = (fields: Fields = {}): AttemptOutcome => ({ _tag: "Delivered", fields })
export const failed = (error: string, retryable: boolean, fields: Fields = {}, deactivate = false): AttemptOutcome => ({
  _tag: "Failed",
  error,
  retryable,
  fields,
  deactivate,
})

/** The columns every delivery row has. */
export interface DeliveryJob {
  readonly id: number
  readonly attempt: number
  readonly locked_until: Date | null
}

/** The columns every delivery target (webhook, endpoint, SMS rule) has. */
export interface DeliveryTarget {
  readonly id: number
  readonly is_active: boolean
}

export interface Channel<J extends DeliveryJob, T extends DeliveryTarget> {
  /** Span name prefix (`WebhookDeliveries`, `EventDeliveries`, `SmsDeliveries`). */
  readonly name: string
  /** The delivery table, its foreign key to the target, and the target table. */
  readonly table: string
  readonly targetKey: string
  readonly targetTable: string
  readonly statuses: {
    /** Rows in these states still have attempts to make (what the worker claims). */
    readonly open: ReadonlyArray<string>
    /** The state while a retry is scheduled. */
    readonly retrying: string
    readonly delivered: string
  }
  /** `last_error` when the target was deactivated or revoked after the row was queued. */
  readonly inactive: string
  /** Columns reset when an attempt ends without an answer of the receiver. */
  readonly noAnswer: Fields
  /** Makes the request. Never fails: a failure is an outcome. */
  readonly perform: (job: J, target: T) => Effect.Effect<AttemptOutcome, DbError>
  /** Turns the target off (after a 410 Gone); joins the recording transaction. */
  readonly deactivate?: (target: T, at: Date) => Effect.Effect<void, DbError>
}

/** A channel's attempts: the claimed path, and rows queued already taken (./handoff.ts). */
export interface Attempts<J extends DeliveryJob, T extends DeliveryTarget> {
  /**
   * Makes the next attempt of a delivery claimed with lease `job.locked_until` and records it.
   * Returns when the following attempt is due, if one was scheduled.
   */
  readonly attempt: (job: J) => Effect.Effect<Option.Option<Date>, DbError>
  /**
   * Makes attempt `job.attempt` of a delivery queued already taken under lease `job.locked_until`,
   * to `target` as it was when queued, and records it (no take: the queuing counted it).
   */
  readonly attemptTaken: (job: J, target: T) => Effect.Effect<Option.Option<Date>, DbError>
  /**
   * Gives back attempts taken but never started (handed rows nobody attempted): uncounted, lease
   * cleared, claimable at once. A row whose lease or attempt moved on is left alone.
   */
  readonly untake: (jobs: ReadonlyArray<J>) => Effect.Effect<void, DbError>
}

/** The attempt function of a channel (`Attempts.attempt`). */
export const makeAttempt = <J extends DeliveryJob, T extends DeliveryTarget>(channel: Channel<J, T>) =>
  Effect.map(makeAttempts(channel), (a) => a.attempt)

/** A channel's attempt functions. */
export const makeAttempts = <J extends DeliveryJob, T extends DeliveryTarget>(channel: Channel<J, T>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const config = yield* AppConfig
    const max = config.webhookMaxAttempts
    const schedule = deliverySchedule(max)
    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))
    const open = channel.statuses.open.map((s) => `'${s}'`).join(", ")

    /** Records the outcome of attempt `n`, only while this worker still holds the lease. */
    const record = (job: J, n: number, status: string, error: string | null, nextAt: Date | null, fields: Fields) => {
      const names = Object.keys(fields)
      const sets = names.map((name, i) => `${name} = $${i + 7}`).join(", ")
      return db.query(
        `UPDATE ${channel.table}
            SET status = $4, last_error = $5, next_attempt_at = $6, locked_until = NULL${sets ? `, ${sets}` : ""}
          WHERE id = $1 AND attempt = $2 AND locked_until = $3`,
        [job.id, n, job.locked_until, status, error, nextAt, ...names.map((name) => fields[name])],
      )
    }

    const fail = (job: J, n: number, error: string, fields: Fields) =>
      record(job, n, "failed", error, null, fields).pipe(Effect.as(Option.none<Date>()))

    const take = (job: J) =>
      Effect.map(
        db.query<{ taken_attempt: number } & T>(
          `WITH taken AS (
             UPDATE ${channel.table} SET attempt = attempt + 1
              WHERE id = $1 AND attempt = $2 AND locked_until = $3 AND status IN (${open})
              RETURNING attempt, ${channel.targetKey})
           SELECT taken.attempt AS taken_attempt, t.* FROM taken JOIN ${channel.targetTable} t ON t.id = taken.${channel.targetKey}`,
          [job.id, job.attempt, job.locked_until],
        ),
        (rows) => rows[0],
      )

    /** Attempt `n`, taken, to `target`: the request, then its outcome recorded. */
    const attemptNumber = Effect.fnUntraced(function*(job: J, n: number, target: T) {
      if (!target.is_active) return yield* fail(job, n, channel.inactive, channel.noAnswer)
      const outcome = yield* channel.perform(job, target)
      const at = yield* now
      if (outcome._tag === "Delivered") {
        yield* record(job, n, channel.statuses.delivered, null, null, outcome.fields)
        return Option.none<Date>()
      }
      if (outcome.deactivate && channel.deactivate) {
        const deactivate = channel.deactivate
        return yield* db.transaction(Effect.gen(function*() {
          yield* deactivate(target, at)
          return yield* fail(job, n, outcome.error, outcome.fields)
        }))
      }
      const delay = outcome.retryable ? yield* delayAfter(schedule, n) : Option.none<Duration.Duration>()
      if (Option.isNone(delay)) return yield* fail(job, n, outcome.error, outcome.fields)
      const nextAt = new Date(at.getTime() + Duration.toMillis(delay.value))
      yield* record(job, n, channel.statuses.retrying, outcome.error, nextAt, outcome.fields)
      return Option.some(nextAt)
    })

    const attempt = Effect.fn(`${channel.name}.attempt`)(function*(job: J) {
      if (job.attempt >= max) {
        // The last attempt was taken by an instance that stopped before recording it.
        return yield* fail(job, job.attempt, "attempt interrupted (instance stopped); no attempts left", channel.noAnswer)
      }
      const taken = yield* take(job)
      // Lease lost, row gone, or its target deleted (the row goes with it).
      if (!taken) return Option.none<Date>()
      return yield* attemptNumber(job, taken.taken_attempt, taken)
    })

    const attemptTaken = Effect.fn(`${channel.name}.attempt`)(function*(job: J, target: T) {
      return yield* attemptNumber(job, job.attempt, target)
    })

    const untake = (jobs: ReadonlyArray<J>) =>
      jobs.length === 0 ? Effect.void : Effect.asVoid(db.query(
        `UPDATE ${channel.table} d SET attempt = d.attempt - 1, locked_until = NULL
           FROM json_to_recordset($1::json) AS u (id int8, attempt int4, lease timestamptz)
          WHERE d.id = u.id AND d.attempt = u.attempt AND d.locked_until = u.lease AND d.status IN (${open})`,
        [JSON.stringify(jobs.map((j) => ({ id: j.id, attempt: j.attempt, lease: j.locked_until })))],
      ))

    return { attempt, attemptTaken, untake } satisfies Attempts<J, T>
  })
