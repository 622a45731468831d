/** Password hashing: the default cost meets the bar, the format carries its parameters. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { DEFAULT_SCRYPT, hashPassword, needsRehash, PasswordHashing, verifyPassword } from "../../effects/accounts/password.ts"

const fast = { logN: 10, r: 8, p: 1 }

describe("password hashing", () => {
  it("defaults to scrypt with at least OWASP's cost (N·r·p ≥ 2^15·8·3)", async () => {
    expect(DEFAULT_SCRYPT.logN).toBeGreaterThanOrEqual(15)
    expect(2 ** DEFAULT_SCRYPT.logN * DEFAULT_SCRYPT.r * DEFAULT_SCRYPT.p).toBeGreaterThanOrEqual(2 ** 15 * 8 * 3)
    expect(await Effect.runPromise(Effect.gen(function*() {
      return yield* PasswordHashing
    }))).toEqual(DEFAULT_SCRYPT)
  })

  it("hashes with a random salt into a self-describing string and verifies", async () => {
    const a = await Effect.runPromise(hashPassword("s3cret passphrase", fast))
    const b = await Effect.runPromise(hashPassword("s3cret passphrase", fast))
    expect(a).toMatch(/^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*$/)
    expect(a).not.toBe(b)
    expect(await Effect.runPromise(verifyPassword("s3cret passphrase", a))).toBe(true)
    expect(await Effect.runPromise(verifyPassword("s3cret passphrasE", a))).toBe(false)
    expect(await Effect.runPromise(verifyPassword("", a))).toBe(false)
  })

  it("verifies with the parameters stored in the hash, and knows when to re-hash", async () => {
    const old = await Effect.runPromise(hashPassword("pw-123456", { logN: 9, r: 8, p: 1 }))
    expect(await Effect.runPromise(verifyPassword("pw-123456", old))).toBe(true)
    expect(needsRehash(old, fast)).toBe(true)
    expect(needsRehash(old, { logN: 9, r: 8, p: 1 })).toBe(false)
  })

  it("treats unreadable or absurd hashes as a mismatch", async () => {
    for (const stored of ["", "plaintext", "$scrypt$ln=40,r=8,p=1$c2FsdA==$a2V5", "$argon2id$v=19$m=1,t=1,p=1$x$y", "$scrypt$ln=10,r=8,p=1$c2FsdA==$"]) {
      expect(await Effect.runPromise(verifyPassword("x", stored))).toBe(false)
    }
  })

  it("normalizes Unicode so the same passphrase typed differently matches", async () => {
    const composed = "café-passwort"
    const decomposed = "cafe\u0301-passwort"
    const h = await Effect.runPromise(hashPassword(composed, fast))
    expect(await Effect.runPromise(verifyPassword(decomposed, h))).toBe(true)
  })
})
