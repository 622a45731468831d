/**
 * `Idempotency-Key` (DECISIONS.md "Outbound"): the first request with a key counts for 24 h. The
 * key is recorded in the charging transaction, pointing at the content it created, so a replay
 * with the same body is answered from those messages without a new send or charge; another body
 * under the same key is 409 CONFLICT, as is a replay while the first is still being dispatched.
 * A single send that fails as a whole releases its key (dispatch.ts), so retrying it sends.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { Conflict, ValidationError } from "../errors.ts"
import { type DatabaseShape, type DbError, isUniqueViolation } from "../ports/Database.ts"
import { sha256Hex } from "../shared/crypto.ts"

export const IDEMPOTENCY_WINDOW = Duration.hours(24)
export const IDEMPOTENCY_HEADER = "Idempotency-Key"

export interface IdempotencyKey {
  readonly key: string
  /** SHA-256 of the endpoint and the canonical request body. */
  readonly fingerprint: string
}

/** JSON with object keys sorted, so the same body written in another key order is the same request. */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`
  }
  return JSON.stringify(value)
}

/** Checks the header (1..255 printable ASCII) and fingerprints the request. */
export const idempotencyKey = (header: string | undefined, endpoint: string, body: unknown) =>
  Effect.gen(function*() {
    if (header === undefined) return Option.none<IdempotencyKey>()
    if (!/^[\x21-\x7e]{1,255}$/.test(header)) {
      return yield* ValidationError.field(IDEMPOTENCY_HEADER, "Idempotency-Key must be 1 to 255 printable ASCII characters")
    }
    return Option.some({ key: header, fingerprint: yield* sha256Hex(`${endpoint}\n${canonical(body)}`) })
  })

const since = (now: Date) => new Date(now.getTime() - Duration.toMillis(IDEMPOTENCY_WINDOW))

/** The content a live key points at (replay), none for a fresh key, or CONFLICT. */
export const lookupKey = (db: DatabaseShape, userId: number, key: IdempotencyKey, now: Date) =>
  Effect.gen(function*() {
    const [row] = yield* db.query<{ request_hash: string; content_id: number }>(
      "SELECT request_hash, content_id FROM outbound_idempotency_keys WHERE user_id = $1 AND key = $2 AND created_at > $3",
      [userId, key.key, since(now)],
    )
    if (!row) return Option.none<number>()
    if (row.request_hash !== key.fingerprint) {
      return yield* new Conflict({ message: "this Idempotency-Key was already used with a different request", field: IDEMPOTENCY_HEADER })
    }
    const busy = yield* db.query("SELECT 1 FROM outbound_messages WHERE content_id = $1 AND status = 'queued' LIMIT 1", [row.content_id])
    if (busy.length > 0) {
      return yield* new Conflict({ message: "a request with this Idempotency-Key is still being processed", field: IDEMPOTENCY_HEADER })
    }
    return Option.some(row.content_id)
  })

/** Records the key in the charging transaction; a concurrent twin fails it with a unique violation. */
export const claimKey = (db: DatabaseShape, userId: number, key: IdempotencyKey, contentId: number, now: Date) =>
  Effect.gen(function*() {
    yield* db.query("DELETE FROM outbound_idempotency_keys WHERE user_id = $1 AND key = $2 AND created_at <= $3", [userId, key.key, since(now)])
    yield* db.query(
      "INSERT INTO outbound_idempotency_keys (user_id, key, request_hash, content_id, created_at) VALUES ($1, $2, $3, $4, $5)",
      [userId, key.key, key.fingerprint, contentId, now],
    )
  })

/** Deletes keys past the window (the recovery worker runs it); returns how many. */
export const purgeKeys = (db: DatabaseShape, now: Date) =>
  Effect.map(
    db.query(
      `DELETE FROM outbound_idempotency_keys WHERE (user_id, key) IN (
         SELECT user_id, key FROM outbound_idempotency_keys WHERE created_at <= $1 LIMIT 1000) RETURNING key`,
      [since(now)],
    ),
    (rows) => rows.length,
  )

const isKeyRace = (e: unknown): e is DbError =>
  typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "DbError" && isUniqueViolation(e as DbError)

/**
 * Runs `send` under an Idempotency-Key (none: just `send`). A live key answers `replay` of what
 * it created. A twin that raced us to the key fails its charging transaction on the key's
 * primary key (so it wrote nothing) and is then answered like a replay, or 409 while the first
 * is still dispatching.
 */
export const withIdempotencyKey = <A, E>(
  db: DatabaseShape,
  userId: number,
  key: Option.Option<IdempotencyKey>,
  replay: (contentId: number) => Effect.Effect<A, DbError>,
  send: Effect.Effect<A, E | DbError>,
): Effect.Effect<A, E | DbError | Conflict> => {
  if (Option.isNone(key)) return send
  const lookup = Effect.gen(function*() {
    const now = new Date(Number(yield* Clock.currentTimeMillis))
    const found = yield* lookupKey(db, userId, key.value, now)
    return Option.isSome(found) ? Option.some(yield* replay(found.value)) : Option.none<A>()
  })
  return Effect.gen(function*() {
    const first = yield* lookup
    if (Option.isSome(first)) return first.value
    return yield* send.pipe(
      Effect.catchIf(isKeyRace, () =>
        Effect.flatMap(lookup, (after) =>
          Option.isSome(after)
            ? Effect.succeed(after.value)
            // The twin failed as a whole and freed the key meanwhile: nothing of ours was written.
            : Effect.fail(new Conflict({ message: "a request with this Idempotency-Key was being processed; retry it", field: IDEMPOTENCY_HEADER }))
        )),
    )
  })
}
