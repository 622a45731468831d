/**
 * Listing inbound messages without counting rows: one statement per page, the total from the
 * address's counters. Walking every page must give each stored message exactly once, newest
 * first, with `total`/`total_pages` right after more mail arrives, after messages are read and
 * after messages are deleted (retention purge); foreign and unknown addresses read nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { purgeMessages } from "../../effects/messages/purge.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"
import { connectSmtp, transaction } from "../support/smtp-client.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const deliver = async (to: string, count: number, tag: string) => {
  const smtp = await connectSmtp(app.mx)
  await smtp.command("EHLO list.example.net")
  const ids: Array<number> = []
  for (let i = 0; i < count; i++) {
    const sent = await transaction(smtp, { from: "alice@sender.example", to: [to], raw: plainMessage({ subject: `${tag}-${i}`, to }) })
    expect(sent.data?.code).toBe(250)
    ids.push(Number(/stored as (\d+)/.exec(sent.data!.text)![1]))
  }
  smtp.destroy()
  return ids
}

interface Page {
  readonly ids: Array<number>
  readonly pagination: { page: number; per_page: number; total: number; total_pages: number }
}

const page = async (acc: TestAccount, addressId: number, n: number, perPage: number, unread = false): Promise<Page> => {
  const r = await app.api.call("GET", `/api/inbound/messages?address_id=${addressId}&page=${n}&per_page=${perPage}${unread ? "&unread=true" : ""}`, {
    token: acc.apiKey,
  })
  expect(r.status, JSON.stringify(r.body)).toBe(200)
  return { ids: r.body.data.map((m: { id: number }) => m.id), pagination: r.body.pagination }
}

/** Every page of the list, checked for consistency; returns the ids in list order. */
const walk = async (acc: TestAccount, addressId: number, perPage: number, unread = false) => {
  const first = await page(acc, addressId, 1, perPage, unread)
  const { total, total_pages } = first.pagination
  expect(total_pages).toBe(Math.ceil(total / perPage))
  const ids = [...first.ids]
  for (let n = 2; n <= total_pages; n++) {
    const p = await page(acc, addressId, n, perPage, unread)
    expect(p.pagination).toEqual({ page: n, per_page: perPage, total, total_pages })
    ids.push(...p.ids)
  }
  expect((await page(acc, addressId, total_pages + 1, perPage, unread)).ids).toEqual([])
  expect(ids).toHaveLength(total)
  return ids
}

describe("paging over counters", () => {
  it("stays exact through arrivals, reads and deletions", async () => {
    const acc = await createAccount(app.api)
    await fund(app.api, acc.userId, 10_000)
    const box = await createAddress(app.api, acc.apiKey, `paging-${Date.now()}`)
    const other = await createAddress(app.api, acc.apiKey, `paging-other-${Date.now()}`)
    const first = await deliver(box.email, 23, "a")
    await deliver(other.email, 4, "noise")

    const newestFirst = (ids: Array<number>) => [...ids].sort((x, y) => y - x)
    expect(await walk(acc, box.id, 5)).toEqual(newestFirst(first))

    // More mail: it leads page 1 and every total moves.
    const more = await deliver(box.email, 4, "b")
    let all = [...first, ...more]
    expect(await walk(acc, box.id, 5)).toEqual(newestFirst(all))
    expect((await page(acc, box.id, 1, 4)).ids).toEqual(newestFirst(more))

    // Read some: the unread list and its total follow.
    for (const id of first.slice(0, 6)) {
      expect((await app.api.call("PATCH", `/api/inbound/messages/${id}/read`, { token: acc.apiKey })).status).toBe(200)
    }
    const unread = all.filter((id) => !first.slice(0, 6).includes(id))
    expect(await walk(acc, box.id, 4, true)).toEqual(newestFirst(unread))

    // Delete some (the retention purge's path), read and unread ones.
    const gone = [first[0]!, first[10]!, more[1]!]
    expect(await app.api.run(purgeMessages("SELECT unnest($1::bigint[])", [gone.map(String)]))).toBe(3)
    all = all.filter((id) => !gone.includes(id))
    expect(await walk(acc, box.id, 5)).toEqual(newestFirst(all))
    expect(await walk(acc, box.id, 4, true)).toEqual(newestFirst(unread.filter((id) => !gone.includes(id))))

    // The counters the totals come from agree with the rows.
    const [counts] = await query<{ rows: number; unread_rows: number; message_count: number; unread_count: number }>(
      app.api,
      `SELECT (SELECT count(*) FROM inbound_messages WHERE address_id = a.id)::int8 AS rows,
              (SELECT count(*) FROM inbound_messages WHERE address_id = a.id AND NOT is_read)::int8 AS unread_rows,
              a.message_count, a.unread_count
         FROM inbound_addresses a WHERE a.id = $1`,
      [box.id],
    )
    expect(counts).toEqual({ rows: all.length, unread_rows: unread.length - 2, message_count: all.length, unread_count: unread.length - 2 })
  })

  it("reads nothing of another account's address and 404s an unknown one", async () => {
    const owner = await createAccount(app.api)
    const stranger = await createAccount(app.api)
    await fund(app.api, owner.userId, 1000)
    const box = await createAddress(app.api, owner.apiKey, `private-${Date.now()}`)
    await deliver(box.email, 2, "secret")
    const foreign = await app.api.call("GET", `/api/inbound/messages?address_id=${box.id}`, { token: stranger.apiKey })
    expect(foreign.status).toBe(403)
    expect(foreign.body.errors[0].code).toBe("FORBIDDEN")
    expect(JSON.stringify(foreign.body)).not.toContain("secret")
    const unknown = await app.api.call("GET", "/api/inbound/messages?address_id=999999999", { token: owner.apiKey })
    expect(unknown.status).toBe(404)
    const bad = await app.api.call("GET", "/api/inbound/messages?address_id=abc&per_page=0", { token: owner.apiKey })
    expect(bad.status).toBe(400)
    expect([...new Set(bad.body.errors.map((e: { field: string }) => e.field))].sort()).toEqual(["address_id", "per_page"])
  })

  it("answers one message with its attachments in the caller's account only", async () => {
    const owner = await createAccount(app.api)
    const stranger = await createAccount(app.api)
    await fund(app.api, owner.userId, 1000)
    const box = await createAddress(app.api, owner.apiKey, `attach-${Date.now()}`)
    const boundary = "b0und4ry"
    const raw = [
      "From: alice@sender.example",
      `To: ${box.email}`,
      "Subject: with attachment",
      "MIME-Version: 1.0",
      `Content-Type: multipart/mixed; boundary=${boundary}`,
      "",
      `--${boundary}`,
      "Content-Type: text/plain",
      "",
      "see attached",
      `--${boundary}`,
      "Content-Type: application/octet-stream; name=data.bin",
      "Content-Disposition: attachment; filename=data.bin",
      "Content-Transfer-Encoding: base64",
      "",
      Buffer.alloc(200, 7).toString("base64"),
      `--${boundary}--`,
      "",
    ].join("\r\n")
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO list.example.net")
    const sent = await transaction(smtp, { from: "alice@sender.example", to: [box.email], raw })
    smtp.destroy()
    const id = Number(/stored as (\d+)/.exec(sent.data!.text)![1])
    const mine = await app.api.call("GET", `/api/inbound/messages/${id}`, { token: owner.apiKey })
    expect(mine.status).toBe(200)
    expect(mine.body.data.attachments).toEqual([
      { filename: "data.bin", content_type: "application/octet-stream", size: 200, content_id: null, content: Buffer.alloc(200, 7).toString("base64") },
    ])
    const theirs = await app.api.call("GET", `/api/inbound/messages/${id}`, { token: stranger.apiKey })
    expect(theirs.status).toBe(403)
    expect(JSON.stringify(theirs.body)).not.toContain("see attached")
    expect((await app.api.call("GET", "/api/inbound/messages/999999999", { token: owner.apiKey })).status).toBe(404)
  })
})
