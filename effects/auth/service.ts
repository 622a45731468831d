/**
 * Who is calling: turns request credentials into a Principal (account + scopes), and offers the
 * guards other capabilities use (scope, verified identity). API keys are looked up by their
 * SHA-256; JWT access tokens are verified locally, then the account row is read so a disabled
 * account stops working on its very next request.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { AccountDisabled, Forbidden, Unauthorized } from "../errors.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { sha256Hex } from "../shared/crypto.ts"
import { signJwt, verifyJwt } from "./jwt.ts"
import { parseScopes, type Scope } from "./scopes.ts"

export interface Principal {
  readonly userId: number
  readonly via: "jwt" | "key"
  readonly apiKeyId: number | null
  /** True for `full` keys and for JWTs. */
  readonly full: boolean
  readonly scopes: ReadonlySet<Scope>
}

export interface Credentials {
  /** The `Authorization` header, as sent. */
  readonly authorization?: string | undefined
  /** The `X-API-Key` header, as sent. */
  readonly apiKey?: string | undefined
}

export const ACCESS_TOKEN_SECONDS = 60 * 60
export const API_KEY_PATTERN = /^MAIL_[0-9a-f]{64}$/

/** `last_used_at` is refreshed at most this often per key. */
const LAST_USED_RESOLUTION_MS = 30_000

/** What a caller may act as: `jwt` endpoints take tokens only, `key` endpoints take keys and tokens. */
export type AuthMode = "jwt" | "key"

export interface AuthenticatorShape {
  readonly authenticate: (
    credentials: Credentials,
    mode: AuthMode,
  ) => Effect.Effect<Principal, Unauthorized | AccountDisabled | DbError>
  /** A signed access token for the account, valid 60 minutes from now. */
  readonly issueAccessToken: (userId: number) => Effect.Effect<{ token: string; expiresAt: Date }>
  /** Fails FORBIDDEN unless the principal holds the scope. */
  readonly requireScope: (principal: Principal, scope: Scope) => Effect.Effect<void, Forbidden>
  /**
   * Fails FORBIDDEN unless the account has a verified identity: a verified email or phone, or
   * for `outbound` with REQUIRE_PHONE_FOR_OUTBOUND=true a verified phone.
   */
  readonly requireVerifiedIdentity: (userId: number, purpose: "address" | "outbound") => Effect.Effect<void, Forbidden | DbError>
}

// The rows credentials are checked against, decoded (queryAs): a schema drift fails closed.
const KeyLookupRow = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  scopes: Schema.String,
  expires_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date),
  last_used_at: Schema.NullOr(Schema.Date),
  disabled_at: Schema.NullOr(Schema.Date),
})
const ActiveUserRow = Schema.Struct({ id: Schema.Int, disabled_at: Schema.NullOr(Schema.Date) })
const VerifiedRow = Schema.Struct({ email_verified: Schema.Boolean, phone_verified: Schema.Boolean })

const unauthorized = (message = "missing or invalid credentials") => new Unauthorized({ message })

/** Splits the headers into the one credential presented; several conflicting ones are refused. */
const presented = (c: Credentials): Option.Option<string> => {
  const fromAuth = c.authorization?.trim()
  const bearer = fromAuth ? /^Bearer\s+(\S+)$/i.exec(fromAuth)?.[1] ?? (/^MAIL_\S+$/.test(fromAuth) ? fromAuth : undefined) : undefined
  if (fromAuth && bearer === undefined) return Option.some("") // malformed header: never fall back to another one
  const key = c.apiKey?.trim()
  if (bearer && key && bearer !== key) return Option.some("")
  return Option.fromNullishOr(bearer ?? key)
}

export class Authenticator extends Context.Service<Authenticator, AuthenticatorShape>()("app/Authenticator") {
  static readonly layer = Layer.effect(
    Authenticator,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig

      const loadActiveUser = (userId: number) =>
        Effect.gen(function*() {
          const rows = yield* queryAs(db, ActiveUserRow, "SELECT id, disabled_at FROM users WHERE id = $1", [userId])
          const user = rows[0]
          if (!user) return yield* unauthorized()
          if (user.disabled_at) return yield* new AccountDisabled({ message: "this account is disabled" })
          return user
        })

      const viaKey = (key: string) =>
        Effect.gen(function*() {
          if (!API_KEY_PATTERN.test(key)) return yield* unauthorized()
          const hash = yield* sha256Hex(key)
          // One round trip for the key and its account: this runs on every API call.
          const rows = yield* queryAs(
            db,
            KeyLookupRow,
            `SELECT k.id, k.user_id, k.scopes, k.expires_at, k.revoked_at, k.last_used_at, u.disabled_at
               FROM api_keys k JOIN users u ON u.id = k.user_id
              WHERE k.key_hash = $1`,
            [hash],
          )
          const row = rows[0]
          if (!row || row.revoked_at) return yield* unauthorized()
          const now = Number(yield* Clock.currentTimeMillis)
          if (row.expires_at && row.expires_at.getTime() <= now) return yield* unauthorized("API key has expired")
          if (row.disabled_at) return yield* new AccountDisabled({ message: "this account is disabled" })
          // Throttled so a busy key does not turn every read into a write.
          if (!row.last_used_at || row.last_used_at.getTime() < now - LAST_USED_RESOLUTION_MS) {
            yield* db.query(
              `UPDATE api_keys SET last_used_at = $2 WHERE id = $1
                 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '30 seconds')`,
              [row.id, new Date(now)],
            )
          }
          const parsed = parseScopes(row.scopes)
          return { userId: row.user_id, via: "key", apiKeyId: row.id, full: parsed.full, scopes: new Set(parsed.scopes) } satisfies Principal
        })

      const viaJwt = (token: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const claims = yield* verifyJwt(config.jwtSecret, token, Math.floor(Number(now) / 1000))
          if (Option.isNone(claims) || claims.value.typ !== "access") return yield* unauthorized()
          const userId = Number(claims.value.sub)
          if (!Number.isSafeInteger(userId)) return yield* unauthorized()
          yield* loadActiveUser(userId)
          const all = parseScopes("full")
          return { userId, via: "jwt", apiKeyId: null, full: true, scopes: new Set(all.scopes) } satisfies Principal
        })

      const authenticate: AuthenticatorShape["authenticate"] = (credentials, mode) =>
        Effect.gen(function*() {
          const token = presented(credentials)
          if (Option.isNone(token) || token.value === "") return yield* unauthorized()
          if (token.value.startsWith("MAIL_")) {
            if (mode === "jwt") return yield* unauthorized("this endpoint requires a user access token, not an API key")
            return yield* viaKey(token.value)
          }
          return yield* viaJwt(token.value)
        }).pipe(Effect.withSpan("Authenticator.authenticate"))

      const issueAccessToken = (userId: number) =>
        Effect.gen(function*() {
          const now = Math.floor(Number(yield* Clock.currentTimeMillis) / 1000)
          const exp = now + ACCESS_TOKEN_SECONDS
          const token = yield* signJwt(config.jwtSecret, { sub: String(userId), typ: "access", iat: now, exp })
          return { token, expiresAt: new Date(exp * 1000) }
        })

      const requireScope = (principal: Principal, scope: Scope) =>
        principal.full || principal.scopes.has(scope)
          ? Effect.void
          : Effect.fail(new Forbidden({ message: `this API key lacks the "${scope}" scope` }))

      const requireVerifiedIdentity = (userId: number, purpose: "address" | "outbound") =>
        Effect.gen(function*() {
          const rows = yield* queryAs(db, VerifiedRow, "SELECT email_verified, phone_verified FROM users WHERE id = $1", [userId])
          const u = rows[0]
          const phoneOnly = purpose === "outbound" && config.requirePhoneForOutbound
          const ok = u !== undefined && (phoneOnly ? u.phone_verified : u.email_verified || u.phone_verified)
          if (!ok) {
            return yield* new Forbidden({
              message: phoneOnly ? "a verified phone number is required" : "a verified email or phone number is required",
            })
          }
        })

      return Authenticator.of({ authenticate, issueAccessToken, requireScope, requireVerifiedIdentity })
    }),
  )
}
