/** The envelope of a page written a group at a time (src/http/streamed.ts). */
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { envelope } from "../../src/http/envelope.ts"
import { streamedEnvelope } from "../../src/http/streamed.ts"
import type { AppRuntime } from "../../src/layers.ts"

// The groups here need no service: an empty runtime runs them as the app's would.
const runtime = ManagedRuntime.make(Layer.empty) as unknown as AppRuntime
afterAll(() => runtime.dispose())

const read = async (stream: ReadableStream<Uint8Array>) => {
  const parts: Array<Uint8Array> = []
  for await (const part of stream) parts.push(part)
  return Buffer.concat(parts).toString("utf8")
}

describe("streamedEnvelope", () => {
  it("writes the bytes the whole envelope would be, each group run only when the client reads on", async () => {
    const ran: Array<number> = []
    const group = (n: number, items: ReadonlyArray<unknown>) => Effect.sync(() => (ran.push(n), items))
    const now = new Date("2026-11-28T10:00:00.000Z")
    const pagination = { page: 2, per_page: 3, total: 7, total_pages: 3 }
    const stream = streamedEnvelope(runtime, "req_1", {
      data: [{ id: 1, s: "a\"b" }],
      more: [group(1, []), group(2, [{ id: 2 }, { id: 3, s: "é\u2028" }])],
      pagination,
    }, now)
    const reader = stream.getReader()
    const first = await reader.read()
    expect(ran).toEqual([])
    const rest: Array<Uint8Array> = [first.value!]
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest.push(r.value)
    expect(ran).toEqual([1, 2])
    const whole = envelope("req_1", { success: true, data: [{ id: 1, s: "a\"b" }, { id: 2 }, { id: 3, s: "é\u2028" }], pagination }, now)
    expect(Buffer.concat(rest).toString("utf8")).toBe(JSON.stringify(whole))
  })

  it("is valid JSON when the items at hand are none and with a message", async () => {
    const text = await read(streamedEnvelope(runtime, "req_2", { message: "m", data: [], more: [Effect.succeed([1]), Effect.succeed([2])] }))
    expect(JSON.parse(text)).toMatchObject({ success: true, message: "m", data: [1, 2], request_id: "req_2" })
  })

  it("cuts the answer off when a group fails, and runs nothing after it", async () => {
    let after = 0
    const stream = streamedEnvelope(runtime, "req_3", {
      data: [1],
      more: [Effect.fail("the database went away"), Effect.sync(() => (after++, [3]))],
    })
    await expect(read(stream)).rejects.toThrow(/could not be completed/)
    expect(after).toBe(0)
  })

  it("fetches nothing more once the client went away", async () => {
    let ran = 0
    const stream = streamedEnvelope(runtime, "req_4", { data: [1], more: [Effect.sync(() => (ran++, [2])), Effect.sync(() => (ran++, [3]))] })
    const reader = stream.getReader()
    await reader.read()
    await reader.cancel()
    expect(ran).toBe(0)
  })
})
