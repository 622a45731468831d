/**
 * Authenticated encryption for secrets that must be read back later (webhook secrets, SMS
 * provider keys, DKIM private keys): AES-256-GCM under SECRETS_KEY with a fresh 96-bit nonce per
 * seal. Secrets that are only ever checked (API keys, passwords) are hashed instead.
 *
 * The sealed form is text, `v1.` + base64url(nonce ‖ ciphertext ‖ tag), so it fits a text column;
 * the version prefix leaves room for key rotation. An optional `context` is bound as additional
 * authenticated data: a value sealed for one purpose ("webhook.secret") does not open as another,
 * so a database writer cannot swap sealed values between columns.
 */
import { Effect, Schema } from "effect"
import { fromBase64Url, toBase64Url } from "./crypto.ts"

/** A sealed value that is malformed, was sealed under another key or context, or was tampered with. */
export class SecretboxError extends Schema.TaggedError<SecretboxError>()("SecretboxError", {
  message: Schema.String,
}) {}

const VERSION = "v1."
const NONCE_BYTES = 12
const enc = new TextEncoder()
const dec = new TextDecoder("utf-8", { fatal: true })

// Importing a key costs a little; services seal and open with the same few keys all the time.
const keys = new WeakMap<Uint8Array, Promise<CryptoKey>>()
const cryptoKey = (key: Uint8Array): Promise<CryptoKey> => {
  let k = keys.get(key)
  if (!k) {
    if (key.length !== 32) return Promise.reject(new Error(`secretbox: expected a 32-byte key, got ${key.length} bytes`))
    k = crypto.subtle.importKey("raw", key as BufferSource, { name: "AES-GCM" }, false, ["encrypt", "decrypt"])
    keys.set(key, k)
  }
  return k
}

const bytes = (data: string | Uint8Array): Uint8Array => (typeof data === "string" ? enc.encode(data) : data)

/** Encrypts `plaintext`. A wrong-sized key is a configuration bug, hence a defect. */
export const seal = (key: Uint8Array, plaintext: string | Uint8Array, context = ""): Effect.Effect<string> =>
  Effect.promise(async () => {
    const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES))
    const sealed = new Uint8Array(
      await crypto.subtle.encrypt(
        { name: "AES-GCM", iv: nonce as BufferSource, additionalData: enc.encode(context) as BufferSource },
        await cryptoKey(key),
        bytes(plaintext) as BufferSource,
      ),
    )
    const out = new Uint8Array(NONCE_BYTES + sealed.length)
    out.set(nonce, 0)
    out.set(sealed, NONCE_BYTES)
    return VERSION + toBase64Url(out)
  })

/** Decrypts a value made by `seal` with the same key and context. */
export const open = (key: Uint8Array, sealed: string, context = ""): Effect.Effect<Uint8Array, SecretboxError> =>
  Effect.tryPromise({
    try: async () => {
      if (!sealed.startsWith(VERSION)) throw new Error("unknown sealed format")
      const raw = fromBase64Url(sealed.slice(VERSION.length))
      if (raw.length < NONCE_BYTES + 16) throw new Error("sealed value too short")
      return new Uint8Array(
        await crypto.subtle.decrypt(
          { name: "AES-GCM", iv: raw.subarray(0, NONCE_BYTES) as BufferSource, additionalData: enc.encode(context) as BufferSource },
          await cryptoKey(key),
          raw.subarray(NONCE_BYTES) as BufferSource,
        ),
      )
    },
    // The cause text stays out: it would only say "decryption failed" anyway.
    catch: () => new SecretboxError({ message: "sealed secret cannot be opened (wrong key, wrong context or tampered)" }),
  })

/** `open` for text secrets. */
export const openText = (key: Uint8Array, sealed: string, context = ""): Effect.Effect<string, SecretboxError> =>
  Effect.flatMap(open(key, sealed, context), (b) =>
    Effect.try({ try: () => dec.decode(b), catch: () => new SecretboxError({ message: "sealed secret is not UTF-8 text" }) }))
