/** The hex and comparison helpers of effects/shared/crypto.ts (node:crypto and Buffer underneath). */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { fromHex, hmacSha256Hex, randomHexSync, sha256Hex, timingSafeEqual, toHex } from "../../effects/shared/crypto.ts"

describe("hex", () => {
  it("writes lowercase, two digits a byte, and reads it back", () => {
    expect(toHex(new Uint8Array([0, 1, 15, 16, 171, 255]))).toBe("00010f10abff")
    expect(toHex(new Uint8Array())).toBe("")
    expect(fromHex("00010f10abff")).toEqual(new Uint8Array([0, 1, 15, 16, 171, 255]))
    expect(fromHex("ABFF")).toEqual(new Uint8Array([171, 255]))
    const hex = randomHexSync(32)
    expect(hex).toMatch(/^[0-9a-f]{64}$/)
    expect(toHex(fromHex(hex))).toBe(hex)
  })

  it("reads only the bytes of a view, not the whole buffer under it", () => {
    const whole = new Uint8Array([1, 2, 3, 4, 5])
    expect(toHex(whole.subarray(1, 3))).toBe("0203")
  })

  it("gives known digests (SHA-256 of \"abc\", RFC 4231 HMAC case 2)", async () => {
    expect(await Effect.runPromise(sha256Hex("abc"))).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(await Effect.runPromise(hmacSha256Hex("Jefe", "what do ya want for nothing?"))).toBe(
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    )
  })
})

describe("timingSafeEqual", () => {
  it("is true only for the same string", () => {
    expect(timingSafeEqual("", "")).toBe(true)
    expect(timingSafeEqual("a1b2c3", "a1b2c3")).toBe(true)
    expect(timingSafeEqual("Habari ✓", "Habari ✓")).toBe(true)
    expect(timingSafeEqual("a1b2c3", "a1b2c4")).toBe(false)
    expect(timingSafeEqual("a1b2c3", "A1B2C3")).toBe(false)
  })

  it("answers false for different lengths instead of throwing", () => {
    expect(timingSafeEqual("abc", "abcd")).toBe(false)
    expect(timingSafeEqual("", "x")).toBe(false)
    // Same number of characters, different number of bytes.
    expect(timingSafeEqual("é", "e")).toBe(false)
  })
})
