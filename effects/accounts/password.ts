/**
 * Password hashing with scrypt (memory-hard; node:crypto, also available on Deno). The stored
 * string carries algorithm, parameters and salt (`$scrypt$ln=15,r=8,p=3$<salt>$<hash>`), so
 * the cost can rise later without invalidating existing hashes: a login with an older cost
 * re-hashes the password.
 */
import { Context, Effect } from "effect"
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto"

export interface ScryptParams {
  /** log2 of the CPU/memory cost N. */
  readonly logN: number
  readonly r: number
  readonly p: number
}

/**
 * OWASP's scrypt alternative N=2^15, r=8, p=3: 32 MiB per hash, ~0.4 s on a small server.
 * Tests lower it only by providing `PasswordHashing` explicitly (test/support).
 */
export const DEFAULT_SCRYPT: ScryptParams = { logN: 15, r: 8, p: 3 }

/** The cost new hashes are made with. */
export const PasswordHashing = Context.Reference<ScryptParams>("app/PasswordHashing", { defaultValue: () => DEFAULT_SCRYPT })

const KEY_LENGTH = 32
const FORMAT = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,3}),p=(\d{1,3})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/

const derive = (password: string, salt: Buffer, params: ScryptParams, length: number): Effect.Effect<Buffer> =>
  Effect.callback<Buffer>((resume) => {
    const N = 2 ** params.logN
    scrypt(password.normalize("NFKC"), salt, length, { N, r: params.r, p: params.p, maxmem: 256 * N * params.r + 1024 * 1024 }, (err, key) => {
      // Only parameters out of range can fail, and they are ours: a defect, not a user error.
      resume(err ? Effect.die(err) : Effect.succeed(key))
    })
  })

export const hashPassword = (password: string, params: ScryptParams): Effect.Effect<string> =>
  Effect.gen(function*() {
    const salt = randomBytes(16)
    const key = yield* derive(password, salt, params, KEY_LENGTH)
    return `$scrypt$ln=${params.logN},r=${params.r},p=${params.p}$${salt.toString("base64")}$${key.toString("base64")}`
  })

const parse = (stored: string) => {
  const m = FORMAT.exec(stored)
  if (!m) return undefined
  const params = { logN: Number(m[1]), r: Number(m[2]), p: Number(m[3]) }
  // Bounds keep a corrupted row from asking for gigabytes.
  if (params.logN < 1 || params.logN > 20 || params.r < 1 || params.r > 32 || params.p < 1 || params.p > 16) return undefined
  return { params, salt: Buffer.from(m[4]!, "base64"), key: Buffer.from(m[5]!, "base64") }
}

/** True when `password` matches `stored`; false for a mismatch or an unreadable hash. */
export const verifyPassword = (password: string, stored: string): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const parsed = parse(stored)
    if (!parsed || parsed.key.length === 0) return false
    const key = yield* derive(password, parsed.salt, parsed.params, parsed.key.length)
    return timingSafeEqual(key, parsed.key)
  })

/** True when `stored` was made with other parameters than `params` (re-hash it at the next login). */
export const needsRehash = (stored: string, params: ScryptParams): boolean => {
  const parsed = parse(stored)
  return !parsed || parsed.params.logN !== params.logN || parsed.params.r !== params.r || parsed.params.p !== params.p
}
