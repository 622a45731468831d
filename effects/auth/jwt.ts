/**
 * HS256 JSON Web Tokens over Web Crypto. Used for access tokens (60 min) and for signed
 * single-use links (email verification). Verification is constant-time and checks `exp`
 * against the caller's clock (pass Clock time so TestClock can drive expiry).
 */
import { Effect, Option } from "effect"
import { fromBase64Url, hmacSha256, timingSafeEqual, toBase64Url } from "../shared/crypto.ts"

const enc = new TextEncoder()
const dec = new TextDecoder()
const HEADER = toBase64Url(enc.encode(JSON.stringify({ alg: "HS256", typ: "JWT" })))

export interface JwtClaims {
  readonly sub: string
  readonly iat: number
  readonly exp: number
  readonly [claim: string]: unknown
}

export const signJwt = (key: Uint8Array, claims: JwtClaims): Effect.Effect<string> =>
  Effect.gen(function*() {
    const body = `${HEADER}.${toBase64Url(enc.encode(JSON.stringify(claims)))}`
    const sig = yield* hmacSha256(key, body)
    return `${body}.${toBase64Url(sig)}`
  })

/** The claims of a well-formed, correctly signed, unexpired token; None otherwise. */
export const verifyJwt = (key: Uint8Array, token: string, nowSeconds: number): Effect.Effect<Option.Option<JwtClaims>> =>
  Effect.gen(function*() {
    const parts = token.split(".")
    if (parts.length !== 3 || parts[0] !== HEADER) return Option.none()
    const expected = toBase64Url(yield* hmacSha256(key, `${parts[0]}.${parts[1]}`))
    if (!timingSafeEqual(expected, parts[2]!)) return Option.none()
    let claims: JwtClaims
    try {
      claims = JSON.parse(dec.decode(fromBase64Url(parts[1]!))) as JwtClaims
    } catch {
      return Option.none()
    }
    if (typeof claims !== "object" || claims === null || typeof claims.exp !== "number" || typeof claims.sub !== "string") {
      return Option.none()
    }
    return claims.exp > nowSeconds ? Option.some(claims) : Option.none()
  })
