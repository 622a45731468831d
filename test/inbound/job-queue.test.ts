/**
 * The order a prepare thread runs its jobs in (src/ingest/job-queue.ts): at most `max` at a time,
 * in arrival order; a job waiting outside the thread lends its slot until its wait ends.
 */
import { describe, expect, it } from "vitest"
import { jobQueue } from "../../src/ingest/job-queue.ts"

/** Jobs that finish when told to; `started` lists them in the order they started. */
const manual = () => {
  const started: Array<number> = []
  const finish = new Map<number, () => void>()
  const start = (n: number) => {
    started.push(n)
    return new Promise<void>((r) => finish.set(n, r))
  }
  const done = async (n: number) => {
    finish.get(n)!()
    // The queue starts the next job once the finished one's promise has settled.
    await new Promise((r) => setTimeout(r, 0))
  }
  return { started, start, done }
}

describe("a prepare thread's job queue", () => {
  it("runs at most two jobs at a time, in the order they came", async () => {
    const m = manual()
    const q = jobQueue(2, m.start)
    for (const n of [1, 2, 3, 4, 5]) q.add(n)
    expect(m.started).toEqual([1, 2])
    expect(q.state()).toEqual({ running: 2, parked: 0, waiting: 3 })
    await m.done(2)
    expect(m.started).toEqual([1, 2, 3])
    await m.done(1)
    await m.done(3)
    expect(m.started).toEqual([1, 2, 3, 4, 5])
    await m.done(4)
    await m.done(5)
    expect(q.state()).toEqual({ running: 0, parked: 0, waiting: 0 })
  })

  it("lends a waiting job's slot to the next until the wait ends", async () => {
    const m = manual()
    const q = jobQueue(1, m.start)
    for (const n of [1, 2, 3]) q.add(n)
    expect(m.started).toEqual([1])
    // Job 1 asks the main thread something: job 2 runs meanwhile.
    const back = q.park()
    expect(m.started).toEqual([1, 2])
    back()
    back() // twice is once
    expect(q.state()).toEqual({ running: 2, parked: 0, waiting: 1 })
    // Two running and one slot: job 3 starts only when both are done.
    await m.done(2)
    expect(m.started).toEqual([1, 2])
    await m.done(1)
    expect(m.started).toEqual([1, 2, 3])
  })

  it("starts the next job when one fails", async () => {
    const started: Array<number> = []
    const q = jobQueue(1, (n: number) => (started.push(n), n === 1 ? Promise.reject(new Error("bad mail")) : new Promise(() => undefined)))
    q.add(1)
    q.add(2)
    await new Promise((r) => setTimeout(r, 0))
    expect(started).toEqual([1, 2])
  })
})
