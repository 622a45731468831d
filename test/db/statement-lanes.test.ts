/**
 * Which lane takes a statement (src/db/statement-lanes.ts): the least loaded, never one stalled
 * behind a slow statement or full, and none at all (the caller's pool) when no lane may.
 */
import { describe, expect, it } from "vitest"
import { statementLanes } from "../../src/db/statement-lanes.ts"

/** `n` lanes whose statements settle when the test says; `ran[i]` lists lane i's statements. */
const harness = (n: number, options: { stallMs?: number; depth?: number; queueMs?: number } = {}) => {
  let clock = 0
  const ran: Array<Array<string>> = Array.from({ length: n }, () => [])
  const pending = new Map<string, { ok: () => void; fail: (e: Error) => void }>()
  const runners = ran.map((list) => (text: string) =>
    new Promise<string>((resolve, reject) => {
      list.push(text)
      pending.set(text, { ok: () => resolve(text), fail: reject })
    })
  )
  const lanes = statementLanes(runners, { ...options, now: () => clock })
  const settle = () => new Promise((r) => setImmediate(r))
  return {
    lanes,
    ran,
    advance: (ms: number) => void (clock += ms),
    finish: async (text: string) => (pending.get(text)!.ok(), await settle()),
    fail: async (text: string, e: Error) => (pending.get(text)!.fail(e), await settle()),
  }
}

describe("statement lanes", () => {
  it("gives each statement to the lane with the fewest in flight", async () => {
    const h = harness(2)
    const runs = ["a", "b", "c", "d", "e"].map((s) => h.lanes.run(s))
    expect(h.ran).toEqual([["a", "c", "e"], ["b", "d"]])
    expect(h.lanes.inFlight()).toEqual([3, 2])
    await h.finish("a")
    await h.finish("c")
    h.lanes.run("f")
    expect(h.ran[0]).toEqual(["a", "c", "e", "f"])
    for (const s of ["b", "d", "e", "f"]) await h.finish(s)
    expect(await Promise.all(runs)).toEqual(["a", "b", "c", "d", "e"])
    expect(h.lanes.inFlight()).toEqual([0, 0])
  })

  it("gives nothing to a lane whose oldest statement has run stallMs, and nothing at all when every lane has", async () => {
    const h = harness(2, { stallMs: 10 })
    h.lanes.run("slow")
    h.advance(9)
    h.lanes.run("b")
    h.lanes.run("c")
    expect(h.ran).toEqual([["slow", "c"], ["b"]])
    h.advance(1)
    // Lane 0's oldest ("slow") is 10 ms old: the next ones go to lane 1, even past its count.
    h.lanes.run("d")
    h.lanes.run("e")
    expect(h.ran).toEqual([["slow", "c"], ["b", "d", "e"]])
    h.advance(10)
    // Lane 1's oldest ("b") is 10 ms old too: no lane may take a statement.
    expect(h.lanes.run("f")).toBeUndefined()
    // Lane 1 moves on, but its oldest is now "d", 10 ms old as well.
    await h.finish("b")
    expect(h.lanes.run("g")).toBeUndefined()
    await h.finish("d")
    await h.finish("e")
    h.lanes.run("h")
    expect(h.ran[1]).toEqual(["b", "d", "e", "h"])
    // Lane 0 takes statements again once what was behind the slow one is done.
    await h.finish("slow")
    await h.finish("c")
    h.lanes.run("j")
    expect(h.ran[0]).toEqual(["slow", "c", "j"])
    expect(h.lanes.inFlight()).toEqual([1, 1])
  })

  it("holds at most `depth` statements per lane", () => {
    const h = harness(2, { depth: 2 })
    const runs = ["a", "b", "c", "d", "e"].map((s) => h.lanes.run(s))
    expect(runs.map((r) => r === undefined)).toEqual([false, false, false, false, true])
    expect(h.lanes.inFlight()).toEqual([2, 2])
  })

  it("queues on a lane only as much as it gets through in queueMs at its recent pace", async () => {
    const h = harness(1, { queueMs: 4, stallMs: 1_000 })
    h.lanes.run("slow")
    h.advance(5)
    await h.finish("slow")
    // 5 ms a statement: an empty lane takes one, but not a second behind it.
    h.lanes.run("a")
    expect(h.lanes.run("b")).toBeUndefined()
    await h.finish("a")
    // Statements that take no time bring the pace down (a moving average): then it takes many.
    for (let i = 0; i < 20; i++) {
      h.lanes.run(`f${i}`)
      await h.finish(`f${i}`)
    }
    const taken = Array.from({ length: 10 }, (_, i) => h.lanes.run(`g${i}`)).filter((r) => r !== undefined)
    expect(taken.length).toBe(10)
  })

  it("passes a statement's error on and counts it as done", async () => {
    const h = harness(1)
    const [a, b] = ["a", "b"].map((s) => h.lanes.run(s)!.then(() => "settled", (e: Error) => e.message))
    // A broken connection fails everything in flight.
    await h.fail("a", new Error("CONNECTION_CLOSED"))
    await h.fail("b", new Error("CONNECTION_CLOSED"))
    expect([await a, await b]).toEqual(["CONNECTION_CLOSED", "CONNECTION_CLOSED"])
    expect(h.lanes.inFlight()).toEqual([0])
    h.lanes.run("c")
    expect(h.ran[0]).toEqual(["a", "b", "c"])
  })

  it("keeps counting right on a lane that never drains", async () => {
    const h = harness(1, { stallMs: 1_000_000 })
    h.lanes.run("s0")
    for (let i = 1; i <= 3000; i++) {
      h.lanes.run(`s${i}`)
      await h.finish(`s${i - 1}`)
      expect(h.lanes.inFlight()).toEqual([1])
    }
    await h.finish("s3000")
    expect(h.lanes.inFlight()).toEqual([0])
  })

  it("with no lanes, takes nothing", () => {
    expect(statementLanes([]).run("SELECT 1")).toBeUndefined()
  })
})
