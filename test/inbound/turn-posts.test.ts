/**
 * Posts to the prepare thread coalesced by turn of the event loop (src/ingest/turn-posts.ts): what
 * is sent in one turn goes in one post, in order, with every buffer it hands over; nothing is
 * posted for a turn that sent nothing, nor after `clear`.
 */
import { setImmediate as nextTurn } from "node:timers/promises"
import { describe, expect, it } from "vitest"
import { turnPosts } from "../../src/ingest/turn-posts.ts"

const recorder = () => {
  const posts: Array<{ messages: Array<string>; transfer: Array<ArrayBuffer> }> = []
  return { posts, sink: turnPosts<string>((messages, transfer) => posts.push({ messages, transfer })) }
}

describe("posts coalesced by turn", () => {
  it("sends what one turn queued in one post, in order, with all its buffers", async () => {
    const { posts, sink } = recorder()
    const a = new ArrayBuffer(4)
    const b = new ArrayBuffer(8)
    sink.send("one", [a])
    sink.send("two")
    sink.send("three", [b])
    expect(posts).toEqual([])
    await nextTurn()
    expect(posts).toEqual([{ messages: ["one", "two", "three"], transfer: [a, b] }])
  })

  it("starts a new post for a later turn, and posts nothing for a turn that sent nothing", async () => {
    const { posts, sink } = recorder()
    sink.send("first")
    await nextTurn()
    await nextTurn()
    sink.send("second")
    await nextTurn()
    expect(posts.map((p) => p.messages)).toEqual([["first"], ["second"]])
  })

  it("posts nothing that was cleared", async () => {
    const { posts, sink } = recorder()
    sink.send("gone", [new ArrayBuffer(2)])
    sink.clear()
    await nextTurn()
    expect(posts).toEqual([])
    sink.send("kept")
    await nextTurn()
    expect(posts).toEqual([{ messages: ["kept"], transfer: [] }])
  })
})
