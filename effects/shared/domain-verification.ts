/**
 * What receiving and sending domains share: a per-account cap on adding them, a DNS proof judged
 * record by record, verification, and the periodic re-check that suspends a verified domain
 * whose records are gone and restores it when they return. Each capability keeps its own
 * records, rows and answers; the statements here run on its table.
 *
 * Each lookup ends as a match, a definitive miss (no such record, or a different value) or
 * unknown (an outage): only misses may suspend a domain, an outage proves nothing.
 */
import { Clock, Duration, Effect } from "effect"
import type { Settings } from "../config.ts"
import { Conflict, type Forbidden, LimitReached, type NotFound, ValidationError } from "../errors.ts"
import { insertWithinCap } from "./caps.ts"
import { type DatabaseShape, DbError, isUniqueViolation } from "../ports/Database.ts"
import { type DnsError, isNoRecord } from "../ports/Dns.ts"
import { owned } from "./ownership.ts"

/** One lookup judged: the expected value, a definitive miss, or unknown (an outage). */
export type Outcome = "match" | "miss" | "unknown"

export const outcome = <A>(lookup: Effect.Effect<A, DnsError>, matches: (a: A) => boolean): Effect.Effect<Outcome> =>
  lookup.pipe(
    Effect.map((a): Outcome => (matches(a) ? "match" : "miss")),
    Effect.catch((e: DnsError) => Effect.succeed<Outcome>(isNoRecord(e) ? "miss" : "unknown")),
  )

export interface RecordCheck<R extends string> {
  readonly ok: boolean
  /** Records DNS answered without the expected value. */
  readonly missing: ReadonlyArray<R>
  /** Records whose lookup failed (timeout, SERVFAIL): unknown, not missing. */
  readonly unknown: ReadonlyArray<R>
}

/** Runs every record's lookup at once and sorts the outcomes. */
export const judgeRecords = <R extends string, X>(
  lookups: Readonly<Record<R, Effect.Effect<Outcome, never, X>>>,
): Effect.Effect<RecordCheck<R>, never, X> =>
  Effect.map(
    Effect.forEach(
      Object.entries(lookups) as Array<[R, Effect.Effect<Outcome, never, X>]>,
      ([record, lookup]) => Effect.map(lookup, (o) => [record, o] as const),
      { concurrency: "unbounded" },
    ),
    (entries) => ({
      ok: entries.every(([, o]) => o === "match"),
      missing: entries.filter(([, o]) => o === "miss").map(([r]) => r),
      unknown: entries.filter(([, o]) => o === "unknown").map(([r]) => r),
    }),
  )

export type DomainStatus = "pending" | "verified" | "suspended"

export interface DomainRow {
  readonly id: number
  readonly user_id: number
  readonly domain: string
  readonly status: DomainStatus
}

/** The platform's own names (and names under them) belong to no account. */
export const refusePlatformDomain = (
  domain: string,
  config: Pick<Settings, "platformDomain" | "mxHost">,
  what: string,
): Effect.Effect<void, ValidationError> => {
  const platform = [config.platformDomain, config.mxHost].map((d) => d.trim().toLowerCase().replace(/\.$/, ""))
  return platform.some((p) => domain === p || domain.endsWith(`.${p}`))
    ? Effect.fail(ValidationError.field("domain", `the platform's own domain cannot be added as a ${what}`))
    : Effect.void
}

export const now: Effect.Effect<Date> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

/** The caller's domain on `table`: 404 when there is none, 403 when it is another account's. */
export const ownedDomain = <Row extends DomainRow>(
  db: DatabaseShape,
  table: DomainTableSpec["table"],
  what: string,
  userId: number,
  id: number,
): Effect.Effect<Row, NotFound | Forbidden | DbError> =>
  Effect.flatMap(db.query<Row>(`SELECT * FROM ${table} WHERE id = $1`, [id]), (rows) => owned(what, rows, userId))

export interface DomainTableSpec {
  readonly table: "receiving_domains" | "sending_domains"
  /** "receiving domain", "sending domain": for messages and logs. */
  readonly what: string
  /** Domains per account. */
  readonly max: number
  readonly recheckEvery: Duration.Input
}

/** The shared statements on one domain table. */
export const domainTable = <Row extends DomainRow>(db: DatabaseShape, spec: DomainTableSpec) => {
  const { table, what, max } = spec
  const every = Duration.toMillis(Duration.fromInputUnsafe(spec.recheckEvery))
  const nextCheck = (at: Date) => new Date(at.getTime() + every)
  const tooMany = new LimitReached({ message: `an account can have at most ${max} ${what}s` })

  const count = (userId: number) =>
    Effect.map(db.query<{ n: number }>(`SELECT count(*)::int8 AS n FROM ${table} WHERE user_id = $1`, [userId]), ([row]) => row?.n ?? 0)

  return {
    /** The caller's domain: 404 when there is none, 403 when it is another account's. */
    owned: (userId: number, id: number) => ownedDomain<Row>(db, table, what, userId, id),
    /** The account's domains, oldest first. */
    ofAccount: (userId: number) => db.query<Row>(`SELECT * FROM ${table} WHERE user_id = $1 ORDER BY id`, [userId]),
    /** The account's domains now; for a cheap refusal before costly work. */
    atCap: (userId: number) => Effect.map(count(userId), (n) => n >= max),
    tooMany,
    /** Runs `insert` if the account is under its cap; two at once cannot both take the last slot. */
    insertWithinCap: <E, R>(userId: number, insert: Effect.Effect<Row, E, R>): Effect.Effect<Row, E | LimitReached | Conflict | DbError, R> =>
      insertWithinCap(db, { table, per: ["user_id", userId], max, message: tooMany.message }, insert).pipe(
        Effect.mapError((e) =>
          e instanceof DbError && isUniqueViolation(e)
            ? new Conflict({ message: "this domain was already added to the account", field: "domain" })
            : e
        ),
      ),
    /** A verify that did not succeed: only the time of the look is kept. */
    markChecked: (id: number, at: Date) => db.query(`UPDATE ${table} SET last_checked_at = $2 WHERE id = $1`, [id, at]),
    /** Verified now (the first verification time is kept); 409 when another account holds it verified. */
    markVerified: (id: number, at: Date): Effect.Effect<Row, Conflict | DbError> =>
      db.query<Row>(
        `UPDATE ${table}
            SET status = 'verified', verified_at = COALESCE(verified_at, $2), last_checked_at = $2, next_check_at = $3, locked_until = NULL
          WHERE id = $1 RETURNING *`,
        [id, at, nextCheck(at)],
      ).pipe(
        Effect.map(([row]) => row!),
        Effect.mapError((e) =>
          isUniqueViolation(e) ? new Conflict({ message: "this domain is already verified by another account", field: "domain" }) : e
        ),
      ),
    /** One periodic re-check of a verified or suspended domain; returns the status it ends in. */
    recheck: <Rec extends string>(row: Row, check: Effect.Effect<RecordCheck<Rec>>): Effect.Effect<DomainStatus, DbError> =>
      Effect.gen(function*() {
        const result = yield* check
        const at = yield* now
        // An outage proves nothing: keep the status and look again next round.
        const next: DomainStatus = result.ok ? "verified" : result.missing.length > 0 ? "suspended" : row.status
        yield* db.query(
          `UPDATE ${table} SET status = $2, last_checked_at = $3, next_check_at = $4, locked_until = NULL
            WHERE id = $1 AND status <> 'pending'`,
          [row.id, next, at, nextCheck(at)],
        ).pipe(
          // Restoring a domain another account verified meanwhile: it stays suspended.
          Effect.catchTag("DbError", (e) =>
            isUniqueViolation(e)
              ? db.query(`UPDATE ${table} SET locked_until = NULL, last_checked_at = $2, next_check_at = $3 WHERE id = $1`, [
                row.id,
                at,
                nextCheck(at),
              ])
              : Effect.fail(e)),
        )
        if (next !== row.status) {
          yield* Effect.logInfo(`${what} status changed`).pipe(
            Effect.annotateLogs({ domain: row.domain, from: row.status, to: next, missing: result.missing.join(",") }),
          )
        }
        return next
      }),
  }
}
