/**
 * freeBytes (effects/shared/free-bytes.ts): a buffer of its own is freed at once; a view into a
 * shared or larger buffer, a detached one and a SharedArrayBuffer's are left as they are.
 */
import { describe, expect, it } from "vitest"
import { freeBytes } from "../../effects/shared/free-bytes.ts"

describe("freeBytes", () => {
  it("frees a buffer that is the whole of its own ArrayBuffer, at once", () => {
    const bytes = Buffer.allocUnsafeSlow(64 * 1024).fill(7)
    const other = new Uint8Array(bytes.buffer) // another view of the same memory
    freeBytes(bytes)
    expect(bytes.buffer.detached).toBe(true)
    expect(bytes.byteLength).toBe(0)
    expect(other.byteLength).toBe(0)
    const plain = new TextEncoder().encode("row")
    freeBytes(plain)
    expect(plain.buffer.detached).toBe(true)
  })

  it("leaves alone a slice of Node's shared pool and a view into a larger buffer", () => {
    const pooled = Buffer.from("small")
    expect(pooled.buffer.byteLength).toBeGreaterThan(pooled.byteLength)
    freeBytes(pooled)
    expect(pooled.toString()).toBe("small")
    const whole = new Uint8Array(16).fill(1)
    const part = whole.subarray(0, 8)
    freeBytes(part)
    expect(whole.buffer.detached).toBe(false)
    expect([...whole]).toEqual(Array(16).fill(1))
    const tail = whole.subarray(8)
    freeBytes(tail)
    expect(whole.byteLength).toBe(16)
  })

  it("does nothing to a buffer already detached, a SharedArrayBuffer's view, or undefined", () => {
    const bytes = new Uint8Array(32)
    structuredClone(bytes.buffer, { transfer: [bytes.buffer] })
    expect(() => freeBytes(bytes)).not.toThrow()
    freeBytes(bytes)
    const shared = new Uint8Array(new SharedArrayBuffer(8))
    shared[0] = 9
    freeBytes(shared)
    expect(shared[0]).toBe(9)
    expect(() => freeBytes(undefined)).not.toThrow()
  })
})
