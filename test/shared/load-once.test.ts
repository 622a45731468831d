import { describe, expect, it } from "vitest"
import { loadOnce } from "../../effects/shared/load-once.ts"

describe("loadOnce", () => {
  it("loads once for every caller, also those that ask while the load runs", async () => {
    let loads = 0
    const load = loadOnce(async () => ({ n: ++loads }))
    const [a, b] = await Promise.all([load(), load()])
    expect(await load()).toBe(a)
    expect(b).toBe(a)
    expect(loads).toBe(1)
  })

  it("tries again after a failed load instead of failing for good", async () => {
    let loads = 0
    const load = loadOnce(async () => {
      if (++loads === 1) throw new Error("EMFILE")
      return "loaded"
    })
    await expect(load()).rejects.toThrow("EMFILE")
    expect(await load()).toBe("loaded")
    expect(await load()).toBe("loaded")
    expect(loads).toBe(2)
  })
})
