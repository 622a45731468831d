/**
 * DKIM keys of sending domains: RSA 2048 (RSASSA-PKCS1-v1_5, SHA-256) made with Web Crypto.
 * The public half is published as `p=` (base64 SubjectPublicKeyInfo); the private half is kept
 * as PKCS#8 PEM sealed under SECRETS_KEY, opened only for a send.
 */
import { Effect } from "effect"
import { toBase64 } from "../shared/crypto.ts"
import { openText, seal, type SecretboxError } from "../shared/secretbox.ts"

/** Secretbox context of `sending_domains.dkim_private_key_sealed`. */
export const DKIM_KEY_CONTEXT = "sending_domains.dkim_private_key"

export interface DkimKeyPair {
  /** Base64 SPKI, the `p=` value of the DKIM record. */
  readonly publicKey: string
  /** PKCS#8 PEM. */
  readonly privateKeyPem: string
}

const pem = (label: string, der: Uint8Array): string =>
  `-----BEGIN ${label}-----\n${toBase64(der).match(/.{1,64}/g)!.join("\n")}\n-----END ${label}-----\n`

export const generateDkimKeyPair: Effect.Effect<DkimKeyPair> = Effect.promise(async () => {
  const pair = await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  )
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", pair.publicKey))
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey))
  return { publicKey: toBase64(spki), privateKeyPem: pem("PRIVATE KEY", pkcs8) }
})

export const sealDkimKey = (secretsKey: Uint8Array, privateKeyPem: string): Effect.Effect<string> =>
  seal(secretsKey, privateKeyPem, DKIM_KEY_CONTEXT)

export const openDkimKey = (secretsKey: Uint8Array, sealed: string): Effect.Effect<string, SecretboxError> =>
  openText(secretsKey, sealed, DKIM_KEY_CONTEXT)
