/**
 * The SMTP memory budget shared between threads (src/smtp/budget.ts): two MemoryBudgets on one
 * SharedArrayBuffer are one budget, a waiter on one is let in by a release on the other (and on
 * another thread), and a thread's share (ThreadBudget) knows what it holds, so its host can take
 * back what a dead thread left. Over real sockets with the MX's thread: ./mx-thread.test.ts.
 */
import { Worker } from "node:worker_threads"
import { describe, expect, it } from "vitest"
import { MemoryBudget, takeBackHeld, ThreadBudget } from "../../src/smtp/budget.ts"

const settled = async <A>(p: Promise<A>, ms = 50): Promise<A | "pending"> =>
  Promise.race([p, new Promise<"pending">((r) => setTimeout(() => r("pending"), ms))])

describe("a memory budget on one SharedArrayBuffer", () => {
  it("is one count for every instance: what one takes the other cannot", () => {
    const a = new MemoryBudget(1000)
    const b = new MemoryBudget(1000, a.shared)
    expect(a.tryTake(600)).toBe(true)
    expect(b.used).toBe(600)
    expect(b.tryTake(500)).toBe(false)
    expect(b.tryTake(400)).toBe(true)
    expect(a.used).toBe(1000)
    b.release(1000)
    expect(a.used).toBe(0)
    // Never below zero, whoever releases too much.
    a.release(50)
    expect(b.used).toBe(0)
  })

  it("lets a waiter in when another instance releases, first come first served on its side", async () => {
    const a = new MemoryBudget(1000)
    const b = new MemoryBudget(1000, a.shared)
    expect(a.tryTake(900)).toBe(true)
    const first = b.take(500)
    const second = b.take(100)
    // A waiter on b's side: small takes there do not overtake it.
    expect(b.tryTake(50)).toBe(false)
    expect(await settled(first)).toBe("pending")
    expect(await settled(second)).toBe("pending")
    a.release(900)
    expect(await settled(first, 500)).toBe(500)
    expect(await settled(second, 500)).toBe(100)
    expect(a.used).toBe(600)
  })

  it("a request larger than the cap waits for an empty budget and takes all of it", async () => {
    const a = new MemoryBudget(1000)
    const b = new MemoryBudget(1000, a.shared)
    expect(a.tryTake(1)).toBe(true)
    const big = b.take(5000)
    expect(await settled(big)).toBe("pending")
    a.release(1)
    expect(await settled(big, 500)).toBe(1000)
  })

  it("is shared with a real thread: its takes count here, and its release lets a waiter here in", async () => {
    const here = new MemoryBudget(1000)
    const worker = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads")
       const used = new BigInt64Array(workerData.shared, 0, 1), wake = new Int32Array(workerData.shared, 8, 1)
       Atomics.add(used, 0, 800n)
       parentPort.postMessage("took")
       parentPort.once("message", () => { Atomics.sub(used, 0, 800n); Atomics.add(wake, 0, 1); Atomics.notify(wake, 0); parentPort.postMessage("released") })`,
      { eval: true, workerData: { shared: here.shared } },
    )
    try {
      await new Promise((r) => worker.once("message", r))
      expect(here.used).toBe(800)
      const waiting = here.take(500)
      expect(await settled(waiting)).toBe("pending")
      worker.postMessage("release")
      // Let in by the other thread's wake-up, well before the one-second re-check.
      expect(await settled(waiting, 500)).toBe(500)
    } finally {
      await worker.terminate()
    }
  })
})

describe("a thread's share of the budget", () => {
  it("counts what the thread holds; handed-over bytes are the taker's; the host takes back the rest", async () => {
    const budget = new MemoryBudget(10_000)
    const held = new SharedArrayBuffer(8)
    const thread = new ThreadBudget(new MemoryBudget(10_000, budget.shared), held)
    expect(thread.tryTake(1000)).toBe(true)
    expect(await thread.take(2000)).toBe(2000)
    thread.release(500)
    expect(budget.used).toBe(2500)
    // A message posted with 1,000 bytes: the host releases them on the budget itself.
    thread.handOver(1000)
    budget.release(1000)
    expect(budget.used).toBe(1500)
    // The thread dies holding 1,500: its host gives them back.
    expect(takeBackHeld(held)).toBe(1500)
    budget.release(1500)
    expect(budget.used).toBe(0)
    expect(takeBackHeld(held)).toBe(0)
  })
})
