/**
 * Principals kept in memory, so an authenticated request costs no database round trip of its
 * own: API key hash → key and account state, account id → disabled flag. Entries are dropped the
 * moment AuthChanges reports a change to the key or its account (revoke, expiry moved, scopes,
 * disabled, deleted), on every instance; expiry itself is checked against the clock on each use.
 *
 * Fail safe: while AuthChanges cannot vouch for timely delivery (listener down, lease lapsed),
 * every lookup reads the database and nothing read then is kept. A lookup that raced a change
 * (the change arrived while its query was in flight) is answered but not kept either.
 *
 * `last_used_at` is noted in memory and written in batches (one statement every few seconds,
 * and before keys are listed), so a busy key does not turn reads into writes.
 */
import { Clock, Context, Effect, Layer, Option, Schedule, Schema } from "effect"
import { createHash } from "node:crypto"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { AuthChanges } from "./changes.ts"
import { parseScopes, type Scope } from "./scopes.ts"

/** SHA-256 hex of a presented key, synchronously (WebCrypto's digest queued on the thread pool behind scrypt). */
export const keyHash = (key: string): string => createHash("sha256").update(key).digest("hex")

export interface KeyRecord {
  readonly keyId: number
  readonly userId: number
  readonly full: boolean
  readonly scopes: ReadonlySet<Scope>
  readonly expiresAt: number | null
  readonly revoked: boolean
  /** The account's state when the record was read (a change to it drops the record). */
  readonly disabled: boolean
  /** Last use written or queued, ms; refreshed at most every LAST_USED_RESOLUTION_MS. */
  lastUsedAt: number | null
}

export interface PrincipalCacheShape {
  /** The key with this hash, or undefined when no key has it. */
  readonly key: (hash: string) => Effect.Effect<KeyRecord | undefined, DbError>
  /** Whether the account is disabled; undefined when it does not exist. */
  readonly userDisabled: (userId: number) => Effect.Effect<boolean | undefined, DbError>
  /** Notes a use of the key at `now` (written later, in a batch). */
  readonly touch: (record: KeyRecord, now: number) => void
  /** Writes the uses noted so far. */
  readonly flushUsage: Effect.Effect<void, DbError>
  /** See AuthChanges.settle: every instance has dropped what was changed before this call. */
  readonly settle: Effect.Effect<void>
}

/** `last_used_at` is refreshed at most this often per key. */
export const LAST_USED_RESOLUTION_MS = 30_000
const USAGE_FLUSH_INTERVAL = "5 seconds"
/** Bound on remembered keys and accounts; the oldest go first. */
const MAX_ENTRIES = 100_000

// The rows credentials are checked against, decoded (queryAs): a schema drift fails closed
// (about 1 µs a row, paid only on a cache miss).
const KeyRow = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  scopes: Schema.String,
  expires_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date),
  last_used_at: Schema.NullOr(Schema.Date),
  disabled_at: Schema.NullOr(Schema.Date),
})
type KeyRow = typeof KeyRow.Type
const UserRow = Schema.Struct({ disabled_at: Schema.NullOr(Schema.Date) })

const toRecord = (row: KeyRow): KeyRecord => {
  const parsed = parseScopes(row.scopes)
  return {
    keyId: row.id,
    userId: row.user_id,
    full: parsed.full,
    scopes: new Set(parsed.scopes),
    expiresAt: row.expires_at ? row.expires_at.getTime() : null,
    revoked: row.revoked_at !== null,
    disabled: row.disabled_at !== null,
    lastUsedAt: row.last_used_at ? row.last_used_at.getTime() : null,
  }
}

export class PrincipalCache extends Context.Service<PrincipalCache, PrincipalCacheShape>()("app/PrincipalCache") {
  static readonly layer = Layer.effect(
    PrincipalCache,
    Effect.gen(function*() {
      const db = yield* Database
      const changes = yield* Effect.serviceOption(AuthChanges)
      const keys = new Map<string, KeyRecord>()
      const hashesOf = new Map<number, Set<string>>()
      const users = new Map<number, boolean>()
      // Bumped by every change: a lookup started before a change must not store what it read.
      let epoch = 0
      const live = Option.match(changes, { onNone: () => () => false, onSome: (c) => c.live })

      const forgetUser = (userId: number) => {
        users.delete(userId)
        for (const h of hashesOf.get(userId) ?? []) keys.delete(h)
        hashesOf.delete(userId)
      }
      if (Option.isSome(changes)) {
        changes.value.subscribe((change) => {
          epoch++
          if (change.kind === "key") {
            const r = keys.get(change.hash)
            keys.delete(change.hash)
            if (r) hashesOf.get(r.userId)?.delete(change.hash)
          } else if (change.kind === "user") forgetUser(change.id)
          else {
            keys.clear()
            hashesOf.clear()
            users.clear()
          }
        })
      }

      const remember = (hash: string, record: KeyRecord) => {
        if (keys.size >= MAX_ENTRIES) {
          const oldest = keys.keys().next().value as string
          const r = keys.get(oldest)!
          keys.delete(oldest)
          hashesOf.get(r.userId)?.delete(oldest)
        }
        keys.set(hash, record)
        let set = hashesOf.get(record.userId)
        if (!set) hashesOf.set(record.userId, (set = new Set()))
        set.add(hash)
      }

      const key = (hash: string): Effect.Effect<KeyRecord | undefined, DbError> => {
        if (live()) {
          const hit = keys.get(hash)
          if (hit) return Effect.succeed(hit)
        }
        const started = epoch
        return Effect.map(
          queryAs(
            db,
            KeyRow,
            `SELECT k.id, k.user_id, k.scopes, k.expires_at, k.revoked_at, k.last_used_at, u.disabled_at
               FROM api_keys k JOIN users u ON u.id = k.user_id
              WHERE k.key_hash = $1`,
            [hash],
          ),
          (rows) => {
            if (!rows[0]) return undefined
            const record = toRecord(rows[0])
            if (started === epoch && live()) remember(hash, record)
            return record
          },
        )
      }

      const userDisabled = (userId: number): Effect.Effect<boolean | undefined, DbError> => {
        if (live()) {
          const hit = users.get(userId)
          if (hit !== undefined) return Effect.succeed(hit)
        }
        const started = epoch
        return Effect.map(
          queryAs(db, UserRow, "SELECT disabled_at FROM users WHERE id = $1", [userId]),
          (rows) => {
            if (!rows[0]) return undefined
            const disabled = rows[0].disabled_at !== null
            if (started === epoch && live()) {
              if (users.size >= MAX_ENTRIES) users.delete(users.keys().next().value as number)
              users.set(userId, disabled)
            }
            return disabled
          },
        )
      }

      let usage = new Map<number, number>()
      const touch = (record: KeyRecord, now: number) => {
        if (record.lastUsedAt !== null && record.lastUsedAt >= now - LAST_USED_RESOLUTION_MS) return
        record.lastUsedAt = now
        usage.set(record.keyId, now)
      }

      const flushUsage = Effect.suspend(() => {
        if (usage.size === 0) return Effect.void
        const batch = usage
        usage = new Map()
        return db.query(
          `UPDATE api_keys k SET last_used_at = v.t
             FROM (SELECT (e->>0)::int8 AS id, to_timestamp((e->>1)::float8 / 1000) AS t FROM jsonb_array_elements($1::jsonb) e) v
            WHERE k.id = v.id AND (k.last_used_at IS NULL OR k.last_used_at < v.t)`,
          [JSON.stringify([...batch])],
        ).pipe(Effect.asVoid)
      })

      yield* Effect.forkScoped(
        flushUsage.pipe(
          Effect.catch((e) => Effect.logWarning("could not record API key use", e)),
          Effect.repeat(Schedule.spaced(USAGE_FLUSH_INTERVAL)),
        ),
      )
      // What is still noted when the service stops is written before the database closes.
      yield* Effect.addFinalizer(() => flushUsage.pipe(Effect.ignore))

      const settle = Option.match(changes, { onNone: () => Effect.void, onSome: (c) => c.settle })
      return PrincipalCache.of({ key, userDisabled, touch, flushUsage, settle })
    }),
  )
}

/** The clock's time in ms (TestClock in tests). */
export const nowMillis = Effect.map(Clock.currentTimeMillis, Number)
