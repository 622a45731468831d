/**
 * The PostgreSQL adapter's admission (src/db/postgres.ts): no more statements on the pool than it
 * has free connections, so postgres.js never pipelines onto busy ones (where its queue decays).
 */
import { describe, expect, it } from "vitest"
import { admission } from "../../src/db/postgres.ts"

/** A call that runs until `finish(i)`; `started` records the order calls began in. */
const harness = (max: number) => {
  const admit = admission(max)
  const started: Array<number> = []
  const finishers = new Map<number, { ok: () => void; fail: (e: Error) => void }>()
  const call = (i: number) =>
    admit.run(() =>
      new Promise<number>((resolve, reject) => {
        started.push(i)
        finishers.set(i, { ok: () => resolve(i), fail: reject })
      })
    )
  const tick = () => new Promise((r) => setImmediate(r))
  return { admit, started, call, finish: (i: number) => finishers.get(i)!.ok(), fail: (i: number, e: Error) => finishers.get(i)!.fail(e), tick }
}

describe("admission of statements to the pool", () => {
  it("runs at most `max` at once and the rest in arrival order as slots free", async () => {
    const h = harness(3)
    const results = Array.from({ length: 7 }, (_, i) => h.call(i))
    await h.tick()
    expect(h.started).toEqual([0, 1, 2])
    expect(h.admit.state()).toEqual({ running: 3, held: 0, waiting: 4 })
    h.finish(1)
    await h.tick()
    expect(h.started).toEqual([0, 1, 2, 3])
    h.finish(0)
    h.finish(3)
    await h.tick()
    expect(h.started).toEqual([0, 1, 2, 3, 4, 5])
    for (const i of [2, 4, 5]) h.finish(i)
    await h.tick()
    h.finish(6)
    expect(await Promise.all(results)).toEqual([0, 1, 2, 3, 4, 5, 6])
    expect(h.admit.state()).toEqual({ running: 0, held: 0, waiting: 0 })
  })

  it("frees the slot of a call that fails, and passes its error on", async () => {
    const h = harness(1)
    const first = h.call(0)
    const second = h.call(1)
    await h.tick()
    h.fail(0, new Error("relation does not exist"))
    await expect(first).rejects.toThrow("relation does not exist")
    await h.tick()
    expect(h.started).toEqual([0, 1])
    h.finish(1)
    expect(await second).toBe(1)
  })

  it("counts connections held by transactions, never makes a transaction wait, and takes each back once", async () => {
    const h = harness(2)
    const giveBack = h.admit.hold()
    const alsoHeld = h.admit.hold()
    expect(h.admit.state()).toEqual({ running: 0, held: 2, waiting: 0 })
    const a = h.call(0)
    await h.tick()
    expect(h.started).toEqual([])
    giveBack()
    giveBack()
    await h.tick()
    expect(h.started).toEqual([0])
    expect(h.admit.state()).toEqual({ running: 1, held: 1, waiting: 0 })
    h.finish(0)
    await a
    alsoHeld()
    expect(h.admit.state()).toEqual({ running: 0, held: 0, waiting: 0 })
  })

  it("keeps its waiting line short under a long backlog (no holes scanned forever)", async () => {
    const h = harness(1)
    const all = Array.from({ length: 5000 }, (_, i) => h.call(i))
    for (let i = 0; i < 5000; i++) {
      await h.tick()
      h.finish(i)
    }
    await Promise.all(all)
    expect(h.started).toEqual(Array.from({ length: 5000 }, (_, i) => i))
    expect(h.admit.state()).toEqual({ running: 0, held: 0, waiting: 0 })
  })
})
