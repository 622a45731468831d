/**
 * Where a received message's rows keep their bodies (migration 034). On an engine without lz4
 * (PGlite) ordinary mail stays whole in its rows, with nothing in the TOAST tables: a TOAST row
 * per body was ~10 % of the batch call there. Larger mail still goes out of line, and both read
 * back intact. On a server with lz4 the tables keep PostgreSQL's default (compressed inline).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"
import { sendRaw } from "../support/smtp-client.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

/** A body of about `size` bytes that does not compress much (no two lines alike). */
const body = (size: number) => {
  const lines: Array<string> = []
  for (let i = 0, n = 0; n < size; i++) {
    lines.push(`${i} ${Math.random().toString(36).slice(2)} ${Math.random().toString(36).slice(2)} ${Math.random().toString(36).slice(2)}`)
    n += lines[lines.length - 1]!.length + 2
  }
  return lines.join("\r\n")
}

/** Rows in the TOAST tables of the two tables a received message is stored in. */
const toasted = async (): Promise<{ messages: number; mime: number }> => {
  const count = async (table: string) => {
    const [rel] = await query<{ toast: string }>(app.api, "SELECT reltoastrelid::regclass::text AS toast FROM pg_class WHERE oid = $1::regclass", [table])
    const [row] = await query<{ n: number }>(app.api, `SELECT count(*)::int8 AS n FROM ${rel!.toast}`)
    return Number(row!.n)
  }
  return { messages: await count("inbound_messages"), mime: await count("inbound_mime") }
}

const lz4 = async () => {
  const [row] = await query<{ c: string }>(
    app.api,
    "SELECT attcompression::text AS c FROM pg_attribute WHERE attrelid = 'inbound_messages'::regclass AND attname = 'text_body'",
  )
  return row!.c === "l"
}

const toastTarget = async (table: string) => {
  const [row] = await query<{ options: Array<string> | string | null }>(app.api, "SELECT reloptions AS options FROM pg_class WHERE oid = $1::regclass", [table])
  return String(row!.options ?? "")
}

describe("received mail's rows", () => {
  it("keep ordinary mail whole in the row without lz4, and larger mail out of line; both read back intact", async () => {
    if (await lz4()) return
    const account = await createAccount(app.api)
    await fund(app.api, account.userId, 1_000)
    const address = await createAddress(app.api, account.apiKey, `inline-${Math.random().toString(16).slice(2, 8)}`)
    const read = async (text: string) => {
      const raw = plainMessage({ to: address.email, subject: "sized", body: text })
      const sent = await sendRaw(app.mx, { from: "alice@sender.example", to: [address.email], raw })
      expect(sent.data?.code, sent.data?.text).toBe(250)
      const [row] = await query<{ id: number }>(app.api, "SELECT max(id) AS id FROM inbound_messages WHERE user_id = $1", [account.userId])
      const got = await app.api.call("GET", `/api/inbound/messages/${row!.id}`, { token: account.apiKey })
      expect(got.status).toBe(200)
      expect(got.body.data.text_body.trim()).toBe(text.replaceAll("\r\n", "\n").trim())
      const eml = await fetch(`${app.api.url}/api/inbound/messages/${row!.id}/raw`, { headers: { authorization: `Bearer ${account.apiKey}` } })
      expect(eml.status).toBe(200)
      expect((await eml.text()).includes(raw.replace(/\r\n$/, ""))).toBe(true)
    }

    const before = await toasted()
    // A 3 KB body: a ~5 KB message row and a ~3.5 KB MIME row, past the default 2 KB target.
    await read(body(3_000))
    expect(await toasted()).toEqual(before)

    // 12 KB does not fit a page: its body goes out of line as before.
    await read(body(12_000))
    const after = await toasted()
    expect(after.messages).toBeGreaterThan(before.messages)
    expect(after.mime).toBeGreaterThan(before.mime)
  })

  it("keeps the server's default where lz4 compresses bodies", async () => {
    if (!(await lz4())) {
      for (const table of ["inbound_messages", "inbound_mime", "sandbox_messages"]) expect(await toastTarget(table)).toContain("toast_tuple_target=8160")
      return
    }
    for (const table of ["inbound_messages", "inbound_mime", "sandbox_messages"]) expect(await toastTarget(table)).not.toContain("toast_tuple_target")
  })
})
