/**
 * API keys for programmatic access: `MAIL_` + 64 lowercase hex from the platform CSPRNG, shown
 * once; only its SHA-256 and a display prefix (first 12 characters) are stored. The
 * Authenticator (effects/auth/service.ts) checks presented keys through the PrincipalCache; a
 * revocation answers only once every instance has dropped the key (the Database port settles
 * credential writes), so it takes effect on the very next request wherever that lands.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { parseScopes, SCOPES } from "../auth/scopes.ts"
import { Forbidden, LimitReached, NotFound, ValidationError } from "../errors.ts"
import { keyHash, PrincipalCache } from "../auth/cache.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { randomHex } from "../shared/crypto.ts"
import { API_KEY_COLUMNS, type ApiKey, ApiKeyRow, type CreateApiKeyBody, toApiKey } from "./schema.ts"

/** Who owns a key: the check before a revocation. */
const OwnerRow = Schema.Struct({ user_id: Schema.Int })

/** Active keys one account may hold (409 LIMIT_REACHED beyond). */
export const MAX_ACTIVE_KEYS = 100
export const KEY_PREFIX_LENGTH = 12

export interface ApiKeysShape {
  /** A new key; `key` is the plaintext, returned this once. */
  readonly create: (
    userId: number,
    input: CreateApiKeyBody,
  ) => Effect.Effect<{ readonly api_key: ApiKey; readonly key: string }, ValidationError | LimitReached | DbError>
  /** The account's keys that are not revoked (expired ones included, with their expires_at). */
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<ApiKey>, DbError>
  /** Revokes the key at once; 404 if no such key, 403 if it belongs to another account. Idempotent. */
  readonly revoke: (userId: number, keyId: number) => Effect.Effect<ApiKey, NotFound | Forbidden | DbError>
}

/**
 * `full`, or the listed scopes as the caller wrote them (trimmed, duplicates dropped, order
 * kept: a client reads back the string it sent); unknown names are a 400 on `scopes`.
 */
const normalizeScopes = (raw: string | undefined): Effect.Effect<string, ValidationError> => {
  if (raw === undefined) return Effect.succeed("full")
  if (raw.split(",").every((s) => s.trim() === "")) {
    return Effect.fail(ValidationError.field("scopes", "Expected \"full\" or a comma-separated list of scopes"))
  }
  const parsed = parseScopes(raw)
  if (parsed.unknown.length > 0) {
    return Effect.fail(
      ValidationError.field("scopes", `unknown scope ${parsed.unknown.map((s) => `"${s}"`).join(", ")}; allowed: full, ${SCOPES.join(", ")}`),
    )
  }
  return Effect.succeed(parsed.full ? "full" : [...new Set(parsed.scopes)].join(","))
}

export class ApiKeys extends Context.Service<ApiKeys, ApiKeysShape>()("app/ApiKeys") {
  static readonly layer = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const db = yield* Database
      const cache = yield* PrincipalCache

      const create = Effect.fn("ApiKeys.create")(function*(userId: number, input: CreateApiKeyBody) {
        const scopes = yield* normalizeScopes(input.scopes)
        const now = yield* Clock.currentTimeMillis
        const expiresAt = input.expires_at ? new Date(input.expires_at) : null
        if (expiresAt && expiresAt.getTime() <= now) return yield* ValidationError.field("expires_at", "must be in the future")
        const key = `MAIL_${yield* randomHex(32)}`
        const hash = keyHash(key)
        const row = yield* db.transaction(Effect.gen(function*() {
          // The account row lock serialises concurrent creations, so the cap holds.
          yield* db.query("SELECT id FROM users WHERE id = $1 FOR UPDATE", [userId])
          const [count] = yield* db.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL",
            [userId],
          )
          if ((count?.n ?? 0) >= MAX_ACTIVE_KEYS) {
            return yield* new LimitReached({ message: `an account can hold at most ${MAX_ACTIVE_KEYS} active API keys; revoke one first` })
          }
          const [inserted] = yield* queryAs(
            db,
            ApiKeyRow,
            `INSERT INTO api_keys (user_id, name, key_prefix, key_hash, scopes, expires_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${API_KEY_COLUMNS}`,
            [userId, input.name.trim(), key.slice(0, KEY_PREFIX_LENGTH), hash, scopes, expiresAt, new Date(now)],
          )
          return inserted!
        }))
        return { api_key: toApiKey(row), key }
      })

      const list = Effect.fn("ApiKeys.list")(function*(userId: number) {
        // Uses noted in memory first, so last_used_at is current.
        yield* cache.flushUsage
        const rows = yield* queryAs(
          db,
          ApiKeyRow,
          `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL ORDER BY id DESC`,
          [userId],
        )
        return rows.map(toApiKey)
      })

      const revoke = Effect.fn("ApiKeys.revoke")(function*(userId: number, keyId: number) {
        const now = yield* Clock.currentTimeMillis
        // The Database port answers a commit that revoked a key once every instance has dropped
        // the key from memory (AuthChanges.settle), so the very next request is refused anywhere.
        return yield* db.transaction(Effect.gen(function*() {
          const [owner] = yield* queryAs(db, OwnerRow, "SELECT user_id FROM api_keys WHERE id = $1 FOR UPDATE", [keyId])
          if (!owner) return yield* new NotFound({ message: "API key not found" })
          if (owner.user_id !== userId) return yield* new Forbidden({ message: "this API key belongs to another account" })
          const [row] = yield* queryAs(
            db,
            ApiKeyRow,
            `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ${API_KEY_COLUMNS}`,
            [keyId, new Date(now)],
          )
          return toApiKey(row!)
        }))
      })

      return ApiKeys.of({ create, list, revoke })
    }),
  ).pipe(Layer.provide(PrincipalCache.layer))
}
