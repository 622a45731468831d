/**
 * HS256 JSON Web Tokens. Used for access tokens (60 min) and for signed single-use links (email
 * verification). Verification is constant-time and checks `exp` against the caller's clock (pass
 * Clock time so TestClock can drive expiry). HMAC runs synchronously through node:crypto: it
 * takes microseconds, and WebCrypto's asynchronous version queues on the thread pool behind
 * password hashing (four scrypt logins stalled every token check).
 */
import { Effect, Option } from "effect"
import { createHmac } from "node:crypto"
import { fromBase64Url, timingSafeEqual, toBase64Url } from "../shared/crypto.ts"

const enc = new TextEncoder()
const dec = new TextDecoder()
const HEADER = toBase64Url(enc.encode(JSON.stringify({ alg: "HS256", typ: "JWT" })))

export interface JwtClaims {
  readonly sub: string
  readonly iat: number
  readonly exp: number
  readonly [claim: string]: unknown
}

const sign = (key: Uint8Array, data: string): string => createHmac("sha256", key).update(data).digest("base64url")

export const signJwt = (key: Uint8Array, claims: JwtClaims): Effect.Effect<string> =>
  Effect.sync(() => {
    const body = `${HEADER}.${toBase64Url(enc.encode(JSON.stringify(claims)))}`
    return `${body}.${sign(key, body)}`
  })

/** The claims of a well-formed, correctly signed, unexpired token; None otherwise. */
export const verifyJwtSync = (key: Uint8Array, token: string, nowSeconds: number): Option.Option<JwtClaims> => {
  const parts = token.split(".")
  if (parts.length !== 3 || parts[0] !== HEADER) return Option.none()
  if (!timingSafeEqual(sign(key, `${parts[0]}.${parts[1]}`), parts[2]!)) return Option.none()
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
}

export const verifyJwt = (key: Uint8Array, token: string, nowSeconds: number): Effect.Effect<Option.Option<JwtClaims>> =>
  Effect.sync(() => verifyJwtSync(key, token, nowSeconds))
