/**
 * Crypto helpers shared by every capability (both Node 24 and Deno 2 have `crypto.subtle`,
 * `node:buffer` and `node:crypto`). Secrets come from the platform CSPRNG, not Effect's `Random`:
 * Random is a seedable PRNG meant for deterministic tests, and a predictable API key or webhook
 * secret would be a vulnerability.
 */
import { Effect } from "effect"
import { Buffer } from "node:buffer"
import { createHash, createHmac, timingSafeEqual as constantTimeEqual } from "node:crypto"

export const toHex = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")

/** Callers pass checked hex (even length, hex digits only); a copy, not a pooled Buffer. */
export const fromHex = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex, "hex"))

export const toBase64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64")
export const toBase64Url = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64url")
export const fromBase64Url = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "base64url"))

/** `n` random bytes as lowercase hex (2n characters). */
export const randomHex = (n: number): Effect.Effect<string> =>
  Effect.sync(() => toHex(crypto.getRandomValues(new Uint8Array(n))))

export const randomHexSync = (n: number): string => toHex(crypto.getRandomValues(new Uint8Array(n)))

/** Lowercase hex SHA-256, synchronous for the same reason as `hmacSha256` below. */
export const sha256Hex = (data: string | Uint8Array): Effect.Effect<string> =>
  Effect.sync(() => createHash("sha256").update(data).digest("hex"))

/**
 * HMAC-SHA256, computed synchronously (node:crypto, on both runtimes). WebCrypto's importKey
 * and sign are each a round trip through the thread pool, and under load each waited for a busy
 * event loop: a webhook delivery (two HMACs and opening the secret) took a median 8.3 ms from
 * claim to the receiver at 200 msgs/s of inbound mail on PGlite, 1.0 ms once synchronous
 * (bench/REPORT.md, MX ingest). An HMAC of a webhook body takes microseconds.
 */
export const hmacSha256 = (key: string | Uint8Array, data: string | Uint8Array): Effect.Effect<Uint8Array> =>
  Effect.sync(() => new Uint8Array(createHmac("sha256", key).update(data).digest()))

/** Lowercase hex HMAC-SHA256, the form of `X-Signature` and `X-Gateway-Signature`. */
export const hmacSha256Hex = (key: string | Uint8Array, data: string | Uint8Array): Effect.Effect<string> =>
  Effect.map(hmacSha256(key, data), toHex)

/**
 * Constant-time comparison of two strings (length leaks, content does not). node:crypto only
 * compares equal lengths; every caller compares digests or codes of a fixed, public length.
 */
export const timingSafeEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a, "utf8")
  const y = Buffer.from(b, "utf8")
  return x.length === y.length && constantTimeEqual(x, y)
}
