/**
 * Google sign-in: checks an `id_token` (RS256 JWT) against Google's published keys
 * (GOOGLE_JWKS_URL, fetched through the HttpClient port and cached) and its claims:
 * issuer Google, audience our GOOGLE_CLIENT_ID, not expired. Without GOOGLE_CLIENT_ID the
 * integration answers NOT_CONFIGURED.
 */
import { Clock, Context, Effect, Layer, Option, Ref, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { NotConfigured, ProviderError, Unauthorized } from "../errors.ts"
import { HttpClient } from "../ports/HttpClient.ts"
import { fromBase64Url } from "../shared/crypto.ts"

/** What the rest of the service learns about a Google user. */
export interface GoogleProfile {
  /** Google's stable account id (`sub`). */
  readonly sub: string
  /** Lowercased; null when the token carries none. */
  readonly email: string | null
  readonly emailVerified: boolean
  readonly name: string | null
}

export interface GoogleIdentityShape {
  readonly verify: (idToken: string) => Effect.Effect<GoogleProfile, Unauthorized | NotConfigured | ProviderError>
}

const ISSUERS = new Set(["accounts.google.com", "https://accounts.google.com"])
/** Clock difference tolerated between Google and us. */
const LEEWAY_SECONDS = 60
/** Keys are cached for the JWKS's max-age within these bounds. */
const MIN_CACHE_MS = 60_000
const MAX_CACHE_MS = 24 * 3600_000
const DEFAULT_CACHE_MS = 3600_000

const Header = Schema.Struct({ alg: Schema.String, kid: Schema.optional(Schema.String) })
const Claims = Schema.Struct({
  iss: Schema.String,
  aud: Schema.Union([Schema.String, Schema.Array(Schema.String)]),
  sub: Schema.String,
  exp: Schema.Number,
  iat: Schema.optional(Schema.Number),
  email: Schema.optional(Schema.String),
  // Older tokens sent the string "true".
  email_verified: Schema.optional(Schema.Union([Schema.Boolean, Schema.String])),
  name: Schema.optional(Schema.String),
})
const Jwks = Schema.Struct({
  keys: Schema.Array(Schema.Struct({ kid: Schema.optional(Schema.String), kty: Schema.String, n: Schema.optional(Schema.String), e: Schema.optional(Schema.String) })),
})

interface KeySet {
  readonly keys: ReadonlyMap<string, CryptoKey>
  readonly fetchedAt: number
  readonly expiresAt: number
}

const dec = new TextDecoder()
const jsonPart = <A>(schema: Schema.Codec<A, any, never, never>, part: string): Option.Option<A> => {
  let value: unknown
  try {
    value = JSON.parse(dec.decode(fromBase64Url(part)))
  } catch {
    return Option.none()
  }
  return Schema.decodeUnknownOption(schema)(value)
}

const maxAgeOf = (cacheControl: string | null): number => {
  const m = /max-age=(\d+)/i.exec(cacheControl ?? "")
  const ms = m ? Number(m[1]) * 1000 : DEFAULT_CACHE_MS
  return Math.min(MAX_CACHE_MS, Math.max(MIN_CACHE_MS, ms))
}

export class GoogleIdentity extends Context.Service<GoogleIdentity, GoogleIdentityShape>()("app/GoogleIdentity") {
  static readonly layer = Layer.effect(
    GoogleIdentity,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const http = yield* HttpClient
      const cache = yield* Ref.make<KeySet | undefined>(undefined)
      const invalid = new Unauthorized({ message: "invalid Google id_token" })

      const fetchKeys = Effect.fn("GoogleIdentity.fetchKeys")(function*() {
        const unavailable = (detail: string) => new ProviderError({ message: "Google's signing keys could not be fetched", detail })
        const res = yield* Effect.tryPromise({
          try: (signal) => http.fetch(config.googleJwksUrl, { headers: { accept: "application/json" }, signal }),
          catch: (e) => unavailable(String(e)),
        }).pipe(Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.fail(unavailable("timeout")) }))
        if (!res.ok) return yield* unavailable(`HTTP ${res.status}`)
        const body = yield* Effect.tryPromise({ try: () => res.json(), catch: (e) => unavailable(String(e)) })
        const jwks = yield* Schema.decodeUnknownEffect(Jwks)(body).pipe(Effect.mapError(() => unavailable("malformed JWKS")))
        const keys = new Map<string, CryptoKey>()
        for (const k of jwks.keys) {
          if (k.kty !== "RSA" || !k.kid || !k.n || !k.e) continue
          const jwk = { kty: "RSA", n: k.n, e: k.e }
          const key = yield* Effect.tryPromise({
            try: () => crypto.subtle.importKey("jwk", jwk, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["verify"]),
            catch: (e) => unavailable(`unusable key ${k.kid}: ${String(e)}`),
          })
          keys.set(k.kid, key)
        }
        const now = yield* Clock.currentTimeMillis
        const set: KeySet = { keys, fetchedAt: now, expiresAt: now + maxAgeOf(res.headers.get("cache-control")) }
        yield* Ref.set(cache, set)
        return set
      })

      /** The key for `kid`: from the cache, refetched when stale or when Google rotated keys. */
      const keyFor = (kid: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          let set = yield* Ref.get(cache)
          // An unknown kid refetches at most once a minute, so forged kids cannot hammer Google.
          if (!set || set.expiresAt <= now || (!set.keys.has(kid) && set.fetchedAt + MIN_CACHE_MS <= now)) set = yield* fetchKeys()
          return Option.fromNullishOr(set.keys.get(kid))
        })

      const verify = Effect.fn("GoogleIdentity.verify")(function*(idToken: string) {
        if (Option.isNone(config.googleClientId)) {
          return yield* new NotConfigured({ message: "Google sign-in is not configured on this server" })
        }
        const clientId = config.googleClientId.value
        const parts = idToken.split(".")
        if (parts.length !== 3) return yield* invalid
        const header = jsonPart(Header, parts[0]!)
        if (Option.isNone(header) || header.value.alg !== "RS256" || !header.value.kid) return yield* invalid
        const claims = jsonPart(Claims, parts[1]!)
        if (Option.isNone(claims)) return yield* invalid
        const key = yield* keyFor(header.value.kid)
        if (Option.isNone(key)) return yield* invalid
        const signed = new TextEncoder().encode(`${parts[0]}.${parts[1]}`)
        const valid = yield* Effect.promise(() =>
          crypto.subtle.verify("RSASSA-PKCS1-v1_5", key.value, fromBase64Url(parts[2]!) as BufferSource, signed).catch(() => false)
        )
        if (!valid) return yield* invalid
        const c = claims.value
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const audiences = typeof c.aud === "string" ? [c.aud] : c.aud
        if (!ISSUERS.has(c.iss) || !audiences.includes(clientId)) return yield* invalid
        if (c.exp + LEEWAY_SECONDS <= now || (c.iat !== undefined && c.iat - LEEWAY_SECONDS > now)) {
          return yield* new Unauthorized({ message: "the Google id_token has expired" })
        }
        if (c.sub === "" || c.sub.length > 255) return yield* invalid
        return {
          sub: c.sub,
          email: c.email ? c.email.toLowerCase() : null,
          emailVerified: c.email_verified === true || c.email_verified === "true",
          name: c.name && c.name.trim() !== "" ? c.name.trim().slice(0, 200) : null,
        } satisfies GoogleProfile
      })

      return GoogleIdentity.of({ verify })
    }),
  )
}
