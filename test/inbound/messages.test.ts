import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, transaction } from "../support/smtp-client.ts"
import { balance, createAddress, fund, type InboundTestApp, plainMessage, startInboundApp, unique } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const get = (path: string, token: string) => app.api.call("GET", path, { token })

/** Sends `subjects.length` messages to `to` on one SMTP session; returns the stored ids in order. */
const deliver = async (to: string, subjects: ReadonlyArray<string>, raw?: (subject: string) => string | Buffer) => {
  const smtp = await connectSmtp(app.mx)
  await smtp.command("EHLO list.example.net")
  const ids: Array<number> = []
  for (const subject of subjects) {
    const sent = await transaction(smtp, { from: "alice@sender.example", to: [to], raw: raw ? raw(subject) : plainMessage({ subject, to }) })
    expect(sent.data?.code).toBe(250)
    ids.push(Number(/stored as (\d+)/.exec(sent.data!.text)![1]))
  }
  smtp.destroy()
  return ids
}

const setup = async () => {
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, 1000)
  const address = await createAddress(app.api, account.apiKey, unique("box"))
  return { ...account, address }
}

describe("GET /api/inbound/messages", () => {
  it("lists newest first with pagination, filters unread, and counts follow mark-read", async () => {
    const { userId, apiKey, address } = await setup()
    const ids = await deliver(address.email, Array.from({ length: 25 }, (_, i) => `m${i}`))
    expect(await balance(app.api, userId)).toBe(1000 - 25 * 5)

    const page1 = await get(`/api/inbound/messages?address_id=${address.id}`, apiKey)
    expect(page1.status).toBe(200)
    expect(page1.body.pagination).toEqual({ page: 1, per_page: 20, total: 25, total_pages: 2 })
    expect(page1.body.data.map((m: { id: number }) => m.id)).toEqual([...ids].reverse().slice(0, 20))
    expect(page1.body.data[0].subject).toBe("m24")
    const page2 = await get(`/api/inbound/messages?address_id=${address.id}&page=2&per_page=20`, apiKey)
    expect(page2.body.data.map((m: { subject: string }) => m.subject)).toEqual(["m4", "m3", "m2", "m1", "m0"])
    for (const page of [9, 1_000_000]) {
      const past = await get(`/api/inbound/messages?address_id=${address.id}&page=${page}`, apiKey)
      expect(past.status).toBe(200)
      expect(past.body.data).toEqual([])
      expect(past.body.pagination.total).toBe(25)
    }
    // DECISIONS.md "Hostile input": pages stop at 1,000,000 (no OFFSET can overflow).
    const beyond = await get(`/api/inbound/messages?address_id=${address.id}&page=999999999999`, apiKey)
    expect(beyond.status).toBe(400)
    expect(beyond.body.errors[0].field).toBe("page")

    for (const id of ids.slice(20)) {
      const r = await app.api.call("PATCH", `/api/inbound/messages/${id}/read`, { token: apiKey })
      expect(r.status).toBe(200)
      expect(r.body.data.is_read).toBe(true)
    }
    // Marking twice changes nothing.
    expect((await app.api.call("PATCH", `/api/inbound/messages/${ids[24]}/read`, { token: apiKey })).status).toBe(200)
    const unread = await get(`/api/inbound/messages?address_id=${address.id}&unread=true&per_page=100`, apiKey)
    expect(unread.body.pagination).toEqual({ page: 1, per_page: 100, total: 20, total_pages: 1 })
    expect(unread.body.data.every((m: { is_read: boolean }) => !m.is_read)).toBe(true)
    expect(unread.body.data[0].id).toBe(ids[19])
    const all = await get(`/api/inbound/messages?address_id=${address.id}&unread=false&per_page=1`, apiKey)
    expect(all.body.pagination.total).toBe(25)
  })

  it("refuses bad paging and a missing or bad address_id with 400 and the field", async () => {
    const { apiKey, address } = await setup()
    const cases: Array<[string, string]> = [
      [`page=0&address_id=${address.id}`, "page"],
      [`page=-1&address_id=${address.id}`, "page"],
      [`page=1.5&address_id=${address.id}`, "page"],
      [`per_page=101&address_id=${address.id}`, "per_page"],
      [`per_page=0&address_id=${address.id}`, "per_page"],
      [`per_page=abc&address_id=${address.id}`, "per_page"],
      [`unread=yes&address_id=${address.id}`, "unread"],
      ["", "address_id"],
      ["address_id=abc", "address_id"],
      ["address_id=0", "address_id"],
    ]
    for (const [q, field] of cases) {
      const r = await get(`/api/inbound/messages?${q}`, apiKey)
      expect(r.status, q).toBe(400)
      expect(r.body.errors.map((e: { field: string }) => e.field), q).toContain(field)
      expect(r.body.errors[0].code).toBe("VALIDATION_ERROR")
    }
  })

  it("answers 403 for another account's address and 404 for an unknown one", async () => {
    const a = await setup()
    const b = await setup()
    const other = await get(`/api/inbound/messages?address_id=${b.address.id}`, a.apiKey)
    expect(other.status).toBe(403)
    expect(other.body.errors[0].code).toBe("FORBIDDEN")
    expect(other.body.data).toBeUndefined()
    expect((await get("/api/inbound/messages?address_id=99999999", a.apiKey)).status).toBe(404)
  })
})

describe("GET, PATCH and raw of one message", () => {
  it("returns the exact InboundMessage fields, decoded bodies and headers as an object", async () => {
    const { apiKey, address } = await setup()
    const [id] = await deliver(address.email, ["x"], () =>
      Buffer.concat([
        Buffer.from(
          `From: =?UTF-8?B?SsO4cmdlbg==?= <jorgen@sender.example>\r\nTo: ${address.email}\r\nSubject: =?ISO-8859-1?Q?Caf=E9_na_chai?=\r\n` +
            "Received: from a\r\nReceived: from b\r\nX-Long: first\r\n  folded\r\n__proto__: polluted\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=iso-8859-1\r\n" +
            "Content-Transfer-Encoding: 8bit\r\n\r\n",
        ),
        Buffer.from("Karibu caf\xe9, bei ni \xa3 5\r\n", "latin1"),
      ]))
    const r = await get(`/api/inbound/messages/${id}`, apiKey)
    expect(r.status).toBe(200)
    const m = r.body.data
    expect(Object.keys(m).sort()).toEqual([
      "address_id",
      "attachments",
      "auth_results",
      "from_addr",
      "headers",
      "html_body",
      "id",
      "is_read",
      "received_at",
      "subject",
      "text_body",
      "tls",
      "to_addr",
    ])
    expect(m.tls).toBeNull()
    expect(m).toMatchObject({ id, address_id: address.id, subject: "Café na chai", html_body: "", attachments: [], is_read: false })
    expect(m.from_addr).toBe("Jørgen <jorgen@sender.example>")
    expect(m.text_body).toContain("Karibu café, bei ni £ 5")
    expect(m.headers["x-long"]).toBe("first folded")
    expect(Object.getOwnPropertyDescriptor(m.headers, "__proto__")?.value).toBe("polluted")
    // Ours on top (Received, Authentication-Results, Received-SPF), then the two the message came with.
    expect(m.headers.received).toHaveLength(3)
    expect(m.headers["authentication-results"]).toContain("mx.inbox.localhost")
    expect(m.auth_results).toMatchObject({ spf: "pass", dkim: [] })
  })

  it("keeps other accounts out: 403 for their message, 404 for none, on GET, raw and read", async () => {
    const a = await setup()
    const b = await setup()
    const [id] = await deliver(b.address.email, ["private"])
    for (const [method, path] of [["GET", `/api/inbound/messages/${id}`], ["GET", `/api/inbound/messages/${id}/raw`], ["PATCH", `/api/inbound/messages/${id}/read`]] as const) {
      const r = await app.api.call(method, path, { token: a.apiKey })
      expect(r.status, path).toBe(403)
      expect(JSON.stringify(r.body)).not.toContain("private")
      expect((await app.api.call(method, path.replace(String(id), "99999999"), { token: a.apiKey })).status).toBe(404)
    }
    const still = await get(`/api/inbound/messages/${id}`, b.apiKey)
    expect(still.body.data.is_read).toBe(false)
  })

  it("serves the raw MIME as message/rfc822 and needs inbound:write to mark read", async () => {
    const { apiKey, address, userId } = await setup()
    const [id] = await deliver(address.email, ["raw"])
    const raw = await app.api.call("GET", `/api/inbound/messages/${id}/raw`, { token: apiKey })
    expect(raw.headers.get("content-type")).toBe("message/rfc822")
    expect(raw.headers.get("content-disposition")).toContain(`message-${id}.eml`)
    expect(raw.headers.get("x-content-type-options")).toBe("nosniff")
    expect(String(raw.body)).toContain("Subject: raw\r\n")
    expect(String(raw.body)).toContain("Habari! This is a test.")

    const { apiKey: readOnly } = await createAccount(app.api, { scopes: "inbound:read" })
    // A read-only key of another account: scope is checked before ownership.
    expect((await app.api.call("PATCH", `/api/inbound/messages/${id}/read`, { token: readOnly })).status).toBe(403)
    expect(userId).toBeGreaterThan(0)
  })
})
