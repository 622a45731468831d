/** Captured messages over HTTP: paging newest first, one message, clearing, ownership. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { INLINE_BODY_BYTES } from "../../effects/shared/heavy-pages.ts"
import { createAccount } from "../support/accounts.ts"
import { transaction } from "../support/smtp-client.ts"
import { plainMessage } from "../support/inbound.ts"
import { capturedCount, capturedId, createCredential, query, type SandboxTestApp, signedIn, startSandboxApp } from "./support.ts"

let app: SandboxTestApp
beforeAll(async () => {
  app = await startSandboxApp()
})
afterAll(() => app.stop())

const call = (method: string, path: string, token: string) => app.api.call(method, path, { token })

/** A message with one attachment. */
const withAttachment = (subject: string) =>
  [
    "From: app@app.example",
    "To: dev@customer.example",
    `Subject: ${subject}`,
    "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b1"',
    "",
    "--b1",
    "Content-Type: text/plain; charset=utf-8",
    "",
    "see attached",
    "--b1",
    'Content-Type: text/csv; name="orders.csv"',
    'Content-Disposition: attachment; filename="orders.csv"',
    "Content-Transfer-Encoding: base64",
    "",
    Buffer.from("id,amount\n1,15000\n").toString("base64"),
    "--b1--",
    "",
  ].join("\r\n")

/** Captures one message per subject on one session; returns the ids in order. */
const capture = async (apiKey: string, subjects: ReadonlyArray<string>, raw: (subject: string) => string = (subject) => plainMessage({ subject })) => {
  const c = await createCredential(app.api, apiKey)
  const smtp = await signedIn(app.port, c.client_id, c.client_secret)
  const ids: Array<number> = []
  for (const subject of subjects) {
    const sent = await transaction(smtp, { from: "app@app.example", to: ["dev@customer.example"], raw: raw(subject) })
    expect(sent.data?.code, sent.data?.text).toBe(250)
    ids.push(capturedId(sent.data!.text))
  }
  smtp.destroy()
  return ids
}

describe("GET /api/sandbox/messages", () => {
  it("writes a page of large captures a group at a time, every body whole and in order", async () => {
    const { apiKey } = await createAccount(app.api)
    const sizes = [100, INLINE_BODY_BYTES * 2, 200]
    // Lines of 76 characters, as mail has them, to about `n` bytes of text.
    const text = (n: number) => Array.from({ length: Math.ceil(n / 78) }, (_, i) => `${i}`.padEnd(76, "z")).join("\r\n")
    const ids = await capture(apiKey, sizes.map((n) => `big${n}`), (subject) => plainMessage({ subject, body: text(Number(subject.slice(3))) }))
    const page = await call("GET", "/api/sandbox/messages", apiKey)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-length")).toBeNull()
    expect(page.body.data.map((m: { id: number }) => m.id)).toEqual([...ids].reverse())
    expect(page.body.data[1].text_body.length).toBeGreaterThan(INLINE_BODY_BYTES)
    // Each item is the capture as GET /api/sandbox/messages/{id} shows it.
    for (const [k, id] of [...ids].reverse().entries()) {
      const one = await call("GET", `/api/sandbox/messages/${id}`, apiKey)
      expect(page.body.data[k]).toEqual(one.body.data)
    }
  })

  it("pages newest first (default 20 per page), and past the end is an empty page", async () => {
    const { apiKey } = await createAccount(app.api)
    const ids = await capture(apiKey, Array.from({ length: 25 }, (_, i) => `m${i}`))
    const page1 = await call("GET", "/api/sandbox/messages", apiKey)
    expect(page1.status).toBe(200)
    expect(page1.body.pagination).toEqual({ page: 1, per_page: 20, total: 25, total_pages: 2 })
    expect(page1.body.data.map((m: { id: number }) => m.id)).toEqual([...ids].reverse().slice(0, 20))
    expect(page1.body.data[0].attachments).toEqual([])
    const page2 = await call("GET", "/api/sandbox/messages?page=2&per_page=20", apiKey)
    expect(page2.body.data.map((m: { subject: string }) => m.subject)).toEqual(["m4", "m3", "m2", "m1", "m0"])
    const small = await call("GET", "/api/sandbox/messages?page=3&per_page=10", apiKey)
    expect(small.body.data).toHaveLength(5)
    expect(small.body.pagination).toEqual({ page: 3, per_page: 10, total: 25, total_pages: 3 })
    const past = await call("GET", "/api/sandbox/messages?page=99", apiKey)
    expect([past.status, past.body.data, past.body.pagination.total]).toEqual([200, [], 25])
  })

  it("refuses paging outside page >= 1 and per_page 1..100 with 400", async () => {
    const { apiKey } = await createAccount(app.api)
    for (const q of ["page=0", "per_page=0", "per_page=101", "page=x", "per_page=2.5"]) {
      const r = await call("GET", `/api/sandbox/messages?${q}`, apiKey)
      expect([r.status, r.body.errors[0].code], q).toEqual([400, "VALIDATION_ERROR"])
    }
  })

  it("an account without captures gets an empty list", async () => {
    const { apiKey } = await createAccount(app.api)
    const r = await call("GET", "/api/sandbox/messages", apiKey)
    expect(r.body).toMatchObject({ success: true, data: [], pagination: { page: 1, per_page: 20, total: 0, total_pages: 0 } })
  })
})

describe("GET /api/sandbox/messages/{id}", () => {
  it("answers the full message; another account's is 403, a missing one 404, a bad id 400", async () => {
    const owner = await createAccount(app.api)
    const other = await createAccount(app.api)
    const [id] = await capture(owner.apiKey, ["mine"])
    const mine = await call("GET", `/api/sandbox/messages/${id}`, owner.apiKey)
    expect(mine.status).toBe(200)
    expect(mine.body.data).toMatchObject({ id, subject: "mine", to_addr: "dev@customer.example", recipients: ["dev@customer.example"] })
    expect(mine.body.data.text_body).toContain("Habari")
    const theirs = await call("GET", `/api/sandbox/messages/${id}`, other.apiKey)
    expect([theirs.status, theirs.body.errors[0].code]).toEqual([403, "FORBIDDEN"])
    expect(JSON.stringify(theirs.body)).not.toContain("mine")
    expect((await call("GET", `/api/sandbox/messages/${id}/raw`, other.apiKey)).status).toBe(403)
    const missing = await call("GET", "/api/sandbox/messages/999999999", owner.apiKey)
    expect([missing.status, missing.body.errors[0].code]).toEqual([404, "NOT_FOUND"])
    expect((await call("GET", "/api/sandbox/messages/0", owner.apiKey)).status).toBe(400)
  })
})

describe("DELETE /api/sandbox/messages", () => {
  it("deletes every captured message of the caller (attachments too), answers the count, and leaves other accounts alone", async () => {
    const a = await createAccount(app.api)
    const b = await createAccount(app.api)
    const idsA = await capture(a.apiKey, ["1", "2", "3"], withAttachment)
    const idsB = await capture(b.apiKey, ["b"], withAttachment)
    const withFile = idsA[0]
    const one = await call("GET", `/api/sandbox/messages/${withFile}`, a.apiKey)
    expect(one.body.data.attachments).toEqual([
      { filename: "orders.csv", content_type: "text/csv", size: 18, content_id: null, content: Buffer.from("id,amount\n1,15000\n").toString("base64") },
    ])
    const attachments = (ids: Array<number>) =>
      query<{ n: number }>(app.api, "SELECT count(*)::int AS n FROM sandbox_attachments WHERE message_id = ANY($1::bigint[])", [ids])
        .then((r) => r[0]!.n)
    expect([await attachments(idsA), await attachments(idsB)]).toEqual([3, 1])
    const r = await call("DELETE", "/api/sandbox/messages", a.apiKey)
    expect(r.status).toBe(200)
    expect(r.body.data).toEqual({ deleted_count: 3 })
    expect(await capturedCount(app.api, a.userId)).toBe(0)
    expect(await capturedCount(app.api, b.userId)).toBe(1)
    expect([await attachments(idsA), await attachments(idsB)]).toEqual([0, 1])
    expect((await call("GET", "/api/sandbox/messages", a.apiKey)).body.data).toEqual([])
    expect((await call("DELETE", "/api/sandbox/messages", a.apiKey)).body.data).toEqual({ deleted_count: 0 })
  })
})

describe("GET /api/sandbox/usage", () => {
  it("counts this month's captures against the 2,000 allowance", async () => {
    const { apiKey } = await createAccount(app.api)
    await capture(apiKey, ["a", "b"])
    const r = await call("GET", "/api/sandbox/usage", apiKey)
    expect(r.status).toBe(200)
    expect(r.body.data).toEqual({ month: new Date().toISOString().slice(0, 7), captured: 2, limit: 2000, remaining: 1998 })
  })
})
