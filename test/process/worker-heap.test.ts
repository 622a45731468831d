/**
 * A worker thread's own young generation (src/worker-heap.ts): the semi-space flags are the
 * thread's while it starts and the process's again once it runs.
 */
import { Worker } from "node:worker_threads"
import { describe, expect, it } from "vitest"
import { withYoungGeneration } from "../../src/worker-heap.ts"

/** The new space's size, as the started thread's isolate sees it. */
const newSpaceOf = (start: (make: () => Worker) => Worker) =>
  new Promise<number>((resolve, reject) => {
    const code = `const v8 = require("node:v8")
require("node:worker_threads").parentPort.postMessage(v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size)`
    const worker = start(() => new Worker(code, { eval: true }))
    worker.once("message", (size: number) => {
      resolve(size)
      void worker.terminate()
    })
    worker.once("error", reject)
  })

describe("withYoungGeneration", () => {
  it("gives the thread semi-spaces of the size asked, and later threads the process's again", async () => {
    const before = await newSpaceOf((make) => make())
    const small = await newSpaceOf((make) => withYoungGeneration(1, make))
    const large = await newSpaceOf((make) => withYoungGeneration(32, make))
    const after = await newSpaceOf((make) => make())
    expect(small).toBeLessThan(large)
    expect(small).toBeLessThanOrEqual(2 * 1024 * 1024)
    expect(large).toBeGreaterThanOrEqual(32 * 1024 * 1024)
    expect(after).toBe(before)
  })

  it("puts the flags back when the thread cannot be made", async () => {
    const before = await newSpaceOf((make) => make())
    expect(() => withYoungGeneration(1, () => { throw new Error("no thread") })).toThrow("no thread")
    expect(await newSpaceOf((make) => make())).toBe(before)
  })
})
