/**
 * Pages of large messages in bounded memory (effects/shared/heavy-pages.ts): the list of an
 * address whose messages have large bodies is written a group at a time, and reads exactly as a
 * page of small ones does.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CHUNK_BODY_BYTES, INLINE_BODY_BYTES } from "../../effects/shared/heavy-pages.ts"
import { InboundMessages } from "../../effects/messages/service.ts"
import { purgeMessages } from "../../effects/messages/purge.ts"
import { createAccount } from "../support/accounts.ts"
import { createAddress, type InboundTestApp, query, startInboundApp, unique } from "../support/inbound.ts"
import { type MessageInput, storeMessage as insert } from "../support/inbound-fixtures.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())


/** A body of `bytes` characters that differs from every other (so a swapped body shows). */
const body = (tag: string, bytes: number) => (tag + " ").padEnd(bytes, tag.slice(-1))

/** A message stored as ingest stores it, its address's counters kept in step (the list reads them). */
const storeMessage = async (api: InboundTestApp["api"], input: MessageInput) => {
  const m = await insert(api, input)
  await query(api, "UPDATE inbound_addresses SET message_count = message_count + 1, unread_count = unread_count + 1 WHERE id = $1", [input.addressId])
  return m
}

const setup = async () => {
  const account = await createAccount(app.api)
  const address = await createAddress(app.api, account.apiKey, unique("heavy"))
  return { ...account, address }
}

describe("a page of large messages", () => {
  it("is answered whole, in order, as the client reads it", async () => {
    const { userId, apiKey, address } = await setup()
    // Light, heavy (past the inline size), and heavy enough that the page takes several groups.
    const sizes = [100, INLINE_BODY_BYTES + 1, 200, Math.ceil(CHUNK_BODY_BYTES * 0.6), 300, Math.ceil(CHUNK_BODY_BYTES * 0.6), 400]
    const stored: Array<{ id: number; text: string }> = []
    for (const [i, size] of sizes.entries()) {
      const text = body(`m${i}`, size)
      const m = await storeMessage(app.api, { userId, addressId: address.id, subject: `m${i}`, text })
      stored.push({ id: m.id, text })
    }
    const r = await app.api.call("GET", `/api/inbound/messages?address_id=${address.id}&per_page=10`, { token: apiKey })
    expect(r.status).toBe(200)
    // Written as it went (chunked), not measured and sent whole.
    expect(r.headers.get("content-length")).toBeNull()
    expect(r.headers.get("content-type")).toMatch(/^application\/json/)
    expect(Object.keys(r.body)).toEqual(["success", "data", "pagination", "request_id", "timestamp"])
    expect(r.body.success).toBe(true)
    expect(r.body.pagination).toEqual({ page: 1, per_page: 10, total: sizes.length, total_pages: 1 })
    const newestFirst = [...stored].reverse()
    expect(r.body.data.map((m: { id: number }) => m.id)).toEqual(newestFirst.map((m) => m.id))
    for (const [k, m] of r.body.data.entries()) {
      expect(m.text_body === newestFirst[k]!.text, `message ${m.id}'s body`).toBe(true)
      expect(m.html_body).toBe("")
      expect(m.subject).toBe(`m${sizes.length - 1 - k}`)
    }
    // Each item is the message as GET /api/inbound/messages/{id} shows it, less what only that shows.
    const one = await app.api.call("GET", `/api/inbound/messages/${stored[3]!.id}`, { token: apiKey })
    const { auth_results: _, ...listed } = one.body.data
    expect(r.body.data[sizes.length - 1 - 3]).toEqual(listed)

    // A page of small messages is answered as before, measured.
    const small = await app.api.call("GET", `/api/inbound/messages?address_id=${address.id}&per_page=1`, { token: apiKey })
    expect(small.headers.get("content-length")).not.toBeNull()
    expect(small.body.data.map((m: { id: number }) => m.id)).toEqual([stored.at(-1)!.id])
  })

  it("leaves out a large message deleted before its group was written", async () => {
    const { userId, address } = await setup()
    const ids: Array<number> = []
    for (const size of [10, INLINE_BODY_BYTES * 2, 10, INLINE_BODY_BYTES * 2]) {
      ids.push((await storeMessage(app.api, { userId, addressId: address.id, text: body(`x${size}`, size) })).id)
    }
    const page = await app.api.run(InboundMessages.use((m) => m.list(userId, { addressId: address.id, unreadOnly: false, page: 1, perPage: 10 })))
    expect(page.data).toEqual([])
    expect(page.more.length).toBeGreaterThan(0)
    await app.api.run(purgeMessages("SELECT $1::int8", [ids[1]]))
    const items = []
    for (const group of page.more) items.push(...(await app.api.run(group)))
    expect(items.map((m) => m.id)).toEqual([ids[3], ids[2], ids[0]])
    expect(items[0]!.text_body.length).toBe(INLINE_BODY_BYTES * 2)
  })

  it("never shows another account's bodies", async () => {
    const mine = await setup()
    const theirs = await setup()
    const heavy = await storeMessage(app.api, { userId: mine.userId, addressId: mine.address.id, text: body("secret", INLINE_BODY_BYTES * 2) })
    // The page was the caller's; the group fetch is scoped to the caller too.
    const r = await app.api.call("GET", `/api/inbound/messages?address_id=${mine.address.id}`, { token: theirs.apiKey })
    expect(r.status).toBe(403)
    const page = await app.api.run(InboundMessages.use((m) => m.list(mine.userId, { addressId: mine.address.id, unreadOnly: false, page: 1, perPage: 10 })))
    expect((await app.api.run(page.more[0]!)).map((m) => m.id)).toEqual([heavy.id])
  })
})
