/**
 * Who is calling: turns request credentials into a Principal (account + scopes), and offers the
 * guards other capabilities use (scope, verified identity). API keys are looked up by their
 * SHA-256, JWT access tokens are verified locally; both then go through the PrincipalCache
 * (effects/auth/cache.ts), which answers from memory and forgets a key or account the moment it
 * changes anywhere, so a revoked key or disabled account stops working on its very next request.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { AccountDisabled, Forbidden, Unauthorized } from "../errors.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { keyHash, PrincipalCache } from "./cache.ts"
import { signJwt, verifyJwtSync } from "./jwt.ts"
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

// Decoded (queryAs): a schema drift fails closed. Key and account rows: effects/auth/cache.ts.
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
      const cache = yield* PrincipalCache
      const jwtScopes = new Set(parseScopes("full").scopes)
      const disabled = new AccountDisabled({ message: "this account is disabled" })

      // The common case (a known, valid key in memory) runs without a database round trip.
      const viaKey = (key: string) =>
        Effect.flatMap(cache.key(keyHash(key)), (record) =>
          Effect.flatMap(Clock.currentTimeMillis, (millis): Effect.Effect<Principal, Unauthorized | AccountDisabled> => {
            if (!record || record.revoked) return Effect.fail(unauthorized())
            const now = Number(millis)
            if (record.expiresAt !== null && record.expiresAt <= now) return Effect.fail(unauthorized("API key has expired"))
            if (record.disabled) return Effect.fail(disabled)
            cache.touch(record, now)
            return Effect.succeed({ userId: record.userId, via: "key", apiKeyId: record.keyId, full: record.full, scopes: record.scopes })
          }))

      const viaJwt = (token: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const claims = verifyJwtSync(config.jwtSecret, token, Math.floor(Number(now) / 1000))
          if (Option.isNone(claims) || claims.value.typ !== "access") return yield* unauthorized()
          const userId = Number(claims.value.sub)
          if (!Number.isSafeInteger(userId)) return yield* unauthorized()
          const isDisabled = yield* cache.userDisabled(userId)
          if (isDisabled === undefined) return yield* unauthorized()
          if (isDisabled) return yield* disabled
          return { userId, via: "jwt", apiKeyId: null, full: true, scopes: jwtScopes } satisfies Principal
        })

      const authenticate: AuthenticatorShape["authenticate"] = (credentials, mode) => {
        const token = presented(credentials)
        if (Option.isNone(token) || token.value === "") return Effect.fail(unauthorized())
        if (token.value.startsWith("MAIL_")) {
          if (mode === "jwt") return Effect.fail(unauthorized("this endpoint requires a user access token, not an API key"))
          if (!API_KEY_PATTERN.test(token.value)) return Effect.fail(unauthorized())
          return viaKey(token.value)
        }
        return viaJwt(token.value)
      }

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
  ).pipe(Layer.provide(PrincipalCache.layer))
}
