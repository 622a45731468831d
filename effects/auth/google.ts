/**
 * Google sign-in: checks an `id_token` (RS256 JWT) with jose against Google's published keys
 * (GOOGLE_JWKS_URL, fetched through the HttpClient port) and its claims: issuer Google,
 * audience our GOOGLE_CLIENT_ID, not expired, not issued in the future. Without
 * GOOGLE_CLIENT_ID the integration answers NOT_CONFIGURED.
 */
import { Clock, Context, Effect, Layer, Option, Ref, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { NotConfigured, ProviderError, Unauthorized } from "../errors.ts"
import { HttpClient } from "../ports/HttpClient.ts"
import { loadOnce } from "../shared/load-once.ts"

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

const ISSUERS = ["accounts.google.com", "https://accounts.google.com"]
/** Clock difference tolerated between Google and us, in seconds. */
const LEEWAY_SECONDS = 60
/**
 * Keys are fetched again after this long. Google publishes a new key well before signing with
 * it, and an unknown `kid` makes jose fetch again anyway (at most once per cooldown).
 */
const CACHE_MS = 3600_000
const UNKNOWN_KID_COOLDOWN_MS = 60_000
const FETCH_TIMEOUT_MS = 10_000

/** The claims we read once jose has checked signature, issuer, audience and times. */
const Profile = Schema.Struct({
  sub: Schema.String,
  email: Schema.optional(Schema.String),
  // Older tokens sent the string "true".
  email_verified: Schema.optional(Schema.Union([Schema.Boolean, Schema.String])),
  name: Schema.optional(Schema.String),
})

/** jose, loaded with the first token checked (a server without Google sign-in never needs it). */
const jose = loadOnce(() => import("jose"))

/** jose failures that are the token's fault (401); anything else is Google or the network (502). */
const tokenErrors = ({ errors }: typeof import("jose")) =>
  new Set<string>([
    errors.JWSInvalid.code,
    errors.JWTInvalid.code,
    errors.JWTClaimValidationFailed.code,
    errors.JWSSignatureVerificationFailed.code,
    errors.JOSEAlgNotAllowed.code,
    errors.JOSENotSupported.code,
    errors.JWKSNoMatchingKey.code,
    errors.JWKSMultipleMatchingKeys.code,
  ])

/** jose's pieces, once loaded: the check, how its failures read, Google's key set (none without a valid GOOGLE_JWKS_URL). */
interface Verifier {
  readonly jwtVerify: typeof import("jose").jwtVerify
  readonly judge: (e: unknown) => Unauthorized | ProviderError
  readonly jwks: ReturnType<typeof import("jose").createRemoteJWKSet> | undefined
}

export class GoogleIdentity extends Context.Service<GoogleIdentity, GoogleIdentityShape>()("app/GoogleIdentity") {
  static readonly layer = Layer.effect(
    GoogleIdentity,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const http = yield* HttpClient
      const invalid = new Unauthorized({ message: "invalid Google id_token" })
      const unavailable = (detail: string) => new ProviderError({ message: "Google's signing keys could not be fetched", detail })

      // jose keeps the keys; its own expiry reads the wall clock, so it is switched off and the
      // age is kept here on Effect's Clock (TestClock drives it in tests). The unknown-kid
      // cooldown stays on the wall clock: it limits how often Google is asked, in real time.
      const verifier = loadOnce((): Promise<Verifier> =>
        jose().then((j) => {
          const known = tokenErrors(j)
          const judge = (e: unknown): Unauthorized | ProviderError =>
            e instanceof j.errors.JWTExpired
              ? new Unauthorized({ message: "the Google id_token has expired" })
              : e instanceof j.errors.JOSEError && known.has(e.code)
              ? invalid
              : unavailable(String(e))
          const jwks = URL.canParse(config.googleJwksUrl)
            ? j.createRemoteJWKSet(new URL(config.googleJwksUrl), {
              [j.customFetch]: http.fetch,
              cacheMaxAge: Number.POSITIVE_INFINITY,
              cooldownDuration: UNKNOWN_KID_COOLDOWN_MS,
              timeoutDuration: FETCH_TIMEOUT_MS,
            })
            : undefined
          return { jwtVerify: j.jwtVerify, judge, jwks }
        })
      )
      const fetchedAt = yield* Ref.make<number | undefined>(undefined)

      const freshKeys = Effect.fn("GoogleIdentity.freshKeys")(function*(jwks: Verifier["jwks"]) {
        if (jwks === undefined) return yield* unavailable("GOOGLE_JWKS_URL is not a URL")
        const now = yield* Clock.currentTimeMillis
        const at = yield* Ref.get(fetchedAt)
        if (at !== undefined && now < at + CACHE_MS) return jwks
        yield* Effect.tryPromise({ try: () => jwks.reload(), catch: (e) => unavailable(String(e)) })
        yield* Ref.set(fetchedAt, now)
        return jwks
      })

      const verify = Effect.fn("GoogleIdentity.verify")(function*(idToken: string) {
        if (Option.isNone(config.googleClientId)) {
          return yield* new NotConfigured({ message: "Google sign-in is not configured on this server" })
        }
        const clientId = config.googleClientId.value
        const { jwtVerify, judge, jwks } = yield* Effect.tryPromise({ try: verifier, catch: (e) => unavailable(String(e)) })
        const keys = yield* freshKeys(jwks)
        const now = yield* Clock.currentTimeMillis
        const { payload } = yield* Effect.tryPromise({
          try: () =>
            jwtVerify(idToken, keys, {
              algorithms: ["RS256"],
              issuer: ISSUERS,
              audience: clientId,
              requiredClaims: ["exp", "iat", "sub"],
              clockTolerance: LEEWAY_SECONDS,
              // Checks that iat is not in the future; Google's tokens live an hour.
              maxTokenAge: "1 day",
              currentDate: new Date(now),
            }),
          catch: judge,
        })
        const c = yield* Schema.decodeUnknownEffect(Profile)(payload).pipe(Effect.mapError(() => invalid))
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
