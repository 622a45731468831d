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
import { Buffer } from "node:buffer"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { fromBase64Url, toBase64Url } from "./crypto.ts"

/** A sealed value that is malformed, was sealed under another key or context, or was tampered with. */
export class SecretboxError extends Schema.TaggedError<SecretboxError>()("SecretboxError", {
  message: Schema.String,
}) {}

const VERSION = "v1."
const NONCE_BYTES = 12
const TAG_BYTES = 16
const dec = new TextDecoder("utf-8", { fatal: true })

/*
 * AES-256-GCM through node:crypto (both runtimes have it), synchronously: WebCrypto's
 * encrypt/decrypt each were a round trip through the thread pool, and opening a webhook's secret
 * then waited for a busy event loop before every delivery (bench/REPORT.md, MX ingest). The
 * sealed layout is WebCrypto's: ciphertext followed by the 16-byte tag, so values sealed before
 * open unchanged (test/webhooks/secretbox.test.ts checks both directions against crypto.subtle).
 */
const checkedKey = (key: Uint8Array): Uint8Array => {
  if (key.length !== 32) throw new Error(`secretbox: expected a 32-byte key, got ${key.length} bytes`)
  return key
}

/** Encrypts `plaintext`. A wrong-sized key is a configuration bug, hence a defect. */
export const seal = (key: Uint8Array, plaintext: string | Uint8Array, context = ""): Effect.Effect<string> =>
  Effect.sync(() => {
    const nonce = randomBytes(NONCE_BYTES)
    const cipher = createCipheriv("aes-256-gcm", checkedKey(key), nonce)
    cipher.setAAD(Buffer.from(context, "utf8"))
    const body = Buffer.concat([cipher.update(typeof plaintext === "string" ? Buffer.from(plaintext, "utf8") : plaintext), cipher.final()])
    return VERSION + toBase64Url(Buffer.concat([nonce, body, cipher.getAuthTag()]))
  })

/** Decrypts a value made by `seal` with the same key and context. */
export const open = (key: Uint8Array, sealed: string, context = ""): Effect.Effect<Uint8Array, SecretboxError> =>
  Effect.try({
    try: () => {
      if (!sealed.startsWith(VERSION)) throw new Error("unknown sealed format")
      const raw = fromBase64Url(sealed.slice(VERSION.length))
      if (raw.length < NONCE_BYTES + TAG_BYTES) throw new Error("sealed value too short")
      const decipher = createDecipheriv("aes-256-gcm", checkedKey(key), raw.subarray(0, NONCE_BYTES))
      decipher.setAAD(Buffer.from(context, "utf8"))
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES))
      return new Uint8Array(Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]))
    },
    // The cause text stays out: it would only say "decryption failed" anyway.
    catch: () => new SecretboxError({ message: "sealed secret cannot be opened (wrong key, wrong context or tampered)" }),
  })

/** `open` for text secrets. */
export const openText = (key: Uint8Array, sealed: string, context = ""): Effect.Effect<string, SecretboxError> =>
  Effect.flatMap(open(key, sealed, context), (b) =>
    Effect.try({ try: () => dec.decode(b), catch: () => new SecretboxError({ message: "sealed secret is not UTF-8 text" }) }))
