/** The shared first-in, first-out line (effects/shared/fifo.ts). */
import { describe, expect, it } from "vitest"
import { fifo } from "../../effects/shared/fifo.ts"

describe("fifo", () => {
  it("gives items back in the order they came, and nothing once empty", () => {
    const line = fifo<string>()
    expect(line.shift()).toBeUndefined()
    line.push("a")
    line.push("b")
    expect(line.peek()).toBe("a")
    expect(line.size()).toBe(2)
    expect(line.shift()).toBe("a")
    line.push("c")
    expect([line.shift(), line.shift(), line.shift()]).toEqual(["b", "c", undefined])
    expect(line.size()).toBe(0)
  })

  it("keeps its order and size right on a line that never empties", () => {
    const line = fifo<number>()
    line.push(0)
    for (let i = 1; i <= 10_000; i++) {
      line.push(i)
      expect(line.shift()).toBe(i - 1)
      expect(line.size()).toBe(1)
    }
    expect(line.peek()).toBe(10_000)
  })
})
