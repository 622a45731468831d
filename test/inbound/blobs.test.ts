/**
 * Large raw MIME as files (effects/ports/MimeBlobs.ts, src/providers/blob-files.ts, migration 033), over real SMTP: a message of at
 * least INGEST_BLOB_BYTES keeps its trace in the row and its body in DATA_DIR/blobs, and reads back
 * byte for byte over HTTP; smaller mail stays in the row. Each way a file can stop being needed is
 * followed to the file: a refusal at commit, the last of several accounts' rows deleted (and not
 * before), the retention purge, and a crash between the write and the commit (the sweep, on its
 * own and at the next start).
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MimeBlobs } from "../../effects/ports/MimeBlobs.ts"
import { parseMail } from "../../effects/ingest/mime.ts"
import { Recipients } from "../../effects/ingest/recipients.ts"
import { Ingest } from "../../effects/ingest/service.ts"
import { smsSummary } from "../../effects/sms/summary.ts"
import { blobGarbageWorker } from "../../src/workers/blob-garbage.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { retentionWorker } from "../../src/workers/retention.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp } from "../support/app.ts"
import { startDnsServer, zoneFixture } from "../support/dns-server.ts"
import { restartableDatabase } from "../support/restartable-db.ts"
import { alternativeMessage, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp, unique } from "../support/inbound.ts"
import { sendRaw } from "../support/smtp-client.ts"

const MIN = 64 * 1024
let app: InboundTestApp
let blobDir: string
beforeAll(async () => {
  app = await startInboundApp({ settings: { ingestBlobBytes: MIN } })
  blobDir = path.join(app.api.settings.dataDir, "blobs")
})
afterAll(() => app.stop())


/** Every blob file's key. */
const files = (): Array<string> =>
  fs.existsSync(blobDir) ? fs.readdirSync(blobDir).flatMap((shard) => fs.readdirSync(path.join(blobDir, shard))) : []

const funded = async (tzs = 1_000) => {
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, tzs)
  const address = await createAddress(app.api, account.apiKey, unique("big"))
  return { ...account, address }
}

/** A message of about `size` bytes whose body varies from line to line (no two bodies alike). */
const sized = (to: string, size: number, subject = "large") => {
  const line = (i: number) => `line ${i} ${unique("x")} ${"0123456789".repeat(6)}\r\n`
  const lines: Array<string> = []
  for (let i = 0, n = 0; n < size; i++) {
    lines.push(line(i))
    n += lines[lines.length - 1]!.length
  }
  return plainMessage({ to, subject, body: lines.join("") })
}

/** Sends `raw` as it is; a string's characters are taken as bytes (latin1: ./smtp-client.ts `dataBlock`). */
const send = async (to: ReadonlyArray<string>, raw: string | Buffer) => {
  const sent = await sendRaw(app.mx, { from: "alice@sender.example", to, raw })
  expect(sent.data?.code, sent.data?.text).toBe(250)
}

const mimeOf = (userId: number) =>
  query<{ id: number; message_id: number; trace: number; size: number; body_blob: string | null }>(
    app.api,
    `SELECT m.id, i.id AS message_id, length(m.raw) AS trace, m.size_bytes AS size, m.body_blob
       FROM inbound_mime m JOIN inbound_messages i ON i.mime_id = m.id WHERE m.user_id = $1 ORDER BY m.id`,
    [userId],
  )

const collect = () => app.api.run(MimeBlobs.use((b) => b.collect(500)))

describe("large raw MIME in DATA_DIR/blobs", () => {
  it("keeps the body of a message over the threshold in a file and gives the whole message back over HTTP", async () => {
    const { userId, apiKey, address } = await funded()
    const big = sized(address.email, 100 * 1024)
    const small = sized(address.email, 2 * 1024, "small")
    await send([address.email], big)
    await send([address.email], small)
    const [large, little] = await mimeOf(userId)
    expect(large!.body_blob).toMatch(/^[0-9a-z]+-[0-9a-f]+$/)
    expect(files()).toContain(large!.body_blob)
    // The row holds the trace (Authentication-Results, Received) only; the file the body as sent.
    const body = Buffer.from(big.replace(/\r\n$/, ""))
    expect(large!.trace).toBeLessThan(2_000)
    expect(large!.size).toBe(large!.trace + fs.statSync(path.join(blobDir, large!.body_blob!.slice(-2), large!.body_blob!)).size)
    expect(little!.body_blob).toBeNull()
    expect(little!.trace).toBe(little!.size)

    const raw = await fetch(`${app.api.url}/api/inbound/messages/${large!.message_id}/raw`, { headers: { authorization: `Bearer ${apiKey}` } })
    expect(raw.status).toBe(200)
    const eml = Buffer.from(await raw.arrayBuffer())
    expect(eml.length).toBe(large!.size)
    expect(eml.subarray(0, large!.trace).toString()).toMatch(/Authentication-Results: [^]*Received: from [^]*\r\n$/)
    expect(eml.subarray(large!.trace).subarray(0, body.length).equals(body)).toBe(true)
    // The parsed message is whole too (its text read back from the file: migration 042).
    const got = await app.api.call("GET", `/api/inbound/messages/${large!.message_id}`, { token: apiKey })
    expect(got.body.data.subject).toBe("large")
    expect(got.body.data.text_body.length).toBeGreaterThan(90 * 1024)
  })

  it("removes the file of a message refused at commit (nothing stored, nothing charged)", async () => {
    const { userId, apiKey, address } = await funded()
    const target = await app.api.run(Recipients.use((r) => r.lookup(address.email)))
    if (target._tag === "ReturnPath") throw new Error("expected an address")
    // Admitted at RCPT, then the address goes before the end of DATA: the commit refuses it.
    const gone = await app.api.call("DELETE", `/api/inbound/addresses/${address.id}`, { token: apiKey })
    expect(gone.status).toBe(200)
    const before = files().length
    const refused = await app.api.run(
      Ingest.use((i) =>
        i.deliver({
          raw: Buffer.from(sized(address.email, 80 * 1024)),
          mailFrom: "alice@sender.example",
          recipients: [address.email],
          destinations: [{ ...target.destination, rcpt: address.email }],
          returnPaths: [],
          client: { ip: "127.0.0.1", helo: "client.example.net" },
        })
      ).pipe(Effect.flip),
    )
    expect(refused._tag).toBe("UnknownRecipient")
    expect(files().length).toBe(before)
    expect(await mimeOf(userId)).toEqual([])
  })

  it("keeps a body shared by two accounts until the last of their rows is deleted", async () => {
    const a = await funded()
    const b = await funded()
    await send([a.address.email, b.address.email], sized(a.address.email, 70 * 1024))
    const [ofA] = await mimeOf(a.userId)
    const [ofB] = await mimeOf(b.userId)
    // One MIME row per account, one file for both.
    expect(ofA!.id).not.toBe(ofB!.id)
    expect(ofA!.body_blob).toBe(ofB!.body_blob)
    const key = ofA!.body_blob!

    expect((await app.api.call("DELETE", `/api/inbound/addresses/${a.address.id}`, { token: a.apiKey })).status).toBe(200)
    await collect()
    expect(files()).toContain(key)
    const raw = await fetch(`${app.api.url}/api/inbound/messages/${ofB!.message_id}/raw`, { headers: { authorization: `Bearer ${b.apiKey}` } })
    expect(Buffer.from(await raw.arrayBuffer()).length).toBe(ofB!.size)

    expect((await app.api.call("DELETE", `/api/inbound/addresses/${b.address.id}`, { token: b.apiKey })).status).toBe(200)
    expect(await query(app.api, "SELECT key FROM blob_garbage WHERE key = $1", [key])).toEqual([{ key }])
    expect(await collect()).toBeGreaterThanOrEqual(1)
    expect(files()).not.toContain(key)
    expect(await query(app.api, "SELECT key FROM blob_garbage WHERE key = $1", [key])).toEqual([])
  })

  it("removes the files of messages the retention purge deleted", async () => {
    const { userId, address } = await funded()
    await send([address.email], sized(address.email, 90 * 1024))
    const [row] = await mimeOf(userId)
    await query(app.api, "UPDATE inbound_messages SET expires_at = now() - interval '1 day' WHERE user_id = $1", [userId])
    await app.api.run(runOnce(retentionWorker("1 hour")))
    expect(await mimeOf(userId)).toEqual([])
    expect(files()).toContain(row!.body_blob)
    // The blob-garbage worker's round (the retention worker wakes it after a purge).
    await app.api.run(runOnce(blobGarbageWorker("1 hour")))
    expect(files()).not.toContain(row!.body_blob)
  })

  it("sweeps files no row names (a crash between the write and the commit), and only those", async () => {
    const { userId, address } = await funded()
    await send([address.email], sized(address.email, 90 * 1024))
    const [kept] = await mimeOf(userId)
    const orphan = `${(Date.now() - 60_000).toString(36)}-deadbeef00000001`
    fs.mkdirSync(path.join(blobDir, orphan.slice(-2)), { recursive: true })
    fs.writeFileSync(path.join(blobDir, orphan.slice(-2), orphan), "half a batch")
    // A file newer than the cut-off is left alone: its batch may still be committing.
    const fresh = `${Date.now().toString(36)}-deadbeef00000002`
    fs.mkdirSync(path.join(blobDir, fresh.slice(-2)), { recursive: true })
    fs.writeFileSync(path.join(blobDir, fresh.slice(-2), fresh), "in flight")
    const cutOff = new Date(Date.now() + 1_000)
    fs.utimesSync(path.join(blobDir, fresh.slice(-2), fresh), new Date(cutOff.getTime() + 60_000), new Date(cutOff.getTime() + 60_000))

    const removed = await app.api.run(MimeBlobs.use((b) => b.sweep(cutOff)))
    expect(removed).toBeGreaterThanOrEqual(1)
    expect(files()).not.toContain(orphan)
    expect(files()).toContain(fresh)
    expect(files()).toContain(kept!.body_blob)
  })
})

/**
 * A plain UTF-8 message with `textBytes` of text (CRLF line ends, non-ASCII on every line) and
 * `headerBytes` more of header lines: the text is the body's own bytes, as most machine mail's is.
 */
const textual = (to: string, textBytes: number, headerBytes = 0) => {
  const marker = unique("start")
  const lines: Array<string> = [`${marker} Habari ya Dar es Salaam`]
  for (let i = 0, n = 0; n < textBytes; i++) {
    lines.push(`mstari ${i}: bei ni TSh 5 — ñandú, 🌍 ${"abcdefghij".repeat(5)}`)
    n += Buffer.byteLength(lines[lines.length - 1]!) + 2
  }
  const padding = Array.from({ length: Math.ceil(headerBytes / 100) }, (_, i) => `X-Padding-${i}: ${"p".repeat(84)}`)
  return { marker, raw: plainMessage({ to, subject: "maandishi", body: lines.join("\r\n"), ...(padding.length ? { extra: padding.join("\r\n") } : {}) }) }
}

/** Each copy of the account's messages: where its text is. */
const textsOf = (userId: number) =>
  query<{ id: number; text_body: string; text_blob: string | null; text_range: Array<number> | null; body_blob: string | null }>(
    app.api,
    `SELECT i.id, i.text_body, i.text_blob, i.text_range, m.body_blob
       FROM inbound_messages i JOIN inbound_mime m ON m.id = i.mime_id WHERE i.user_id = $1 ORDER BY i.id`,
    [userId],
  )

/** The text the row held before 042: what the parser makes of the message (sent as UTF-8). */
const parsedText = async (raw: string) => (await parseMail(Buffer.from(raw))).text

const listed = async (apiKey: string, addressId: number) => {
  const res = await app.api.call("GET", `/api/inbound/messages?address_id=${addressId}&per_page=100`, { token: apiKey })
  expect(res.status).toBe(200)
  return res.body.data as Array<{ id: number; text_body: string }>
}

describe("a large text body kept once, in its message's file", () => {
  it("stores the text of a large plain message only in the file, and every read gives the text the row would have held", async () => {
    const { userId, apiKey, address } = await funded()
    const { marker, raw } = textual(address.email, 100 * 1024)
    await send([address.email], Buffer.from(raw))
    const [row] = await textsOf(userId)
    expect(row!.text_body).toBe("")
    expect(row!.text_blob).toBe(row!.body_blob)
    expect(row!.text_range![1]).toBeGreaterThan(100 * 1024)

    const expected = await parsedText(raw)
    expect(expected.startsWith(marker)).toBe(true)
    expect(expected).toContain("ñandú, 🌍")
    expect(expected).not.toContain("\r\n")
    const got = await app.api.call("GET", `/api/inbound/messages/${row!.id}`, { token: apiKey })
    expect(got.status).toBe(200)
    expect(got.body.data.text_body).toBe(expected)
    // In a page it is a heavy row (its size counts the file's text), read with its group.
    expect((await listed(apiKey, address.id)).map((m) => m.text_body)).toEqual([expected])
    const read = await app.api.call("PATCH", `/api/inbound/messages/${row!.id}/read`, { token: apiKey })
    expect(read.body.data.text_body).toBe(expected)
  })

  it("reads the text part of a large multipart/alternative message from the file too; its HTML stays in the row", async () => {
    const { userId, apiKey, address } = await funded()
    const plain = textual(address.email, 80 * 1024)
    const [head, text] = plain.raw.split("\r\n\r\n", 2) as [string, string]
    const html = `<p>${plain.marker} Habari — ñandú</p>`
    const rootHead = head.split("\r\n").filter((line) => !/^Content-Type:/i.test(line))
    const raw = alternativeMessage({ head: rootHead, text, html, textHeaders: ["Content-Transfer-Encoding: 8bit"] })
    await send([address.email], Buffer.from(raw))
    const [row] = await textsOf(userId)
    expect(row!.text_body).toBe("")
    expect(row!.text_blob).toBe(row!.body_blob)
    const parsed = await parseMail(Buffer.from(raw))
    expect(parsed.text.startsWith(plain.marker)).toBe(true)
    const got = await app.api.call("GET", `/api/inbound/messages/${row!.id}`, { token: apiKey })
    expect(got.status).toBe(200)
    expect(got.body.data.text_body).toBe(parsed.text)
    expect(got.body.data.html_body).toBe(parsed.html)
    expect(parsed.html).toContain(html)
  })

  it("makes an SMS summary of a message whose text is in its file, and of one whose short text is in its row, as from the whole text", async () => {
    const { userId, address } = await funded()
    await query(
      app.api,
      "INSERT INTO sms_rules (user_id, address_id, phone_number, provider_key_sealed, provider_key_prefix) VALUES ($1, $2, '+255712345678', 'x', 'x')",
      [userId, address.id],
    )
    const long = textual(address.email, 100 * 1024).raw
    const short = textual(address.email, 8 * 1024, 70 * 1024).raw
    await send([address.email], Buffer.from(long))
    await send([address.email], Buffer.from(short))
    const rows = await textsOf(userId)
    expect(rows.map((r) => [r.body_blob !== null, r.text_blob !== null])).toEqual([[true, true], [true, false]])
    const bodies = await query<{ body: string }>(
      app.api,
      "SELECT d.body FROM sms_deliveries d JOIN inbound_messages m ON m.id = d.message_id WHERE m.user_id = $1 ORDER BY m.id",
      [userId],
    )
    const expected = await Promise.all([long, short].map(async (raw) => {
      const parsed = await parseMail(Buffer.from(raw))
      return smsSummary({ fromAddr: parsed.from, subject: parsed.subject, smsBody: parsed.text })
    }))
    expect(bodies.map((b) => b.body)).toEqual(expected)
    expect(expected[0]).toContain("Habari ya Dar es Salaam mstari 0: bei ni TSh 5")
  })

  it("reads a file's text into a light page row too (a large message whose text is under the page's inline size)", async () => {
    const { userId, apiKey, address } = await funded()
    const light = textual(address.email, 20 * 1024, 50 * 1024)
    const small = sized(address.email, 1024, "small")
    await send([address.email], Buffer.from(light.raw))
    await send([address.email], small)
    const [row] = await textsOf(userId)
    expect(row!.body_blob).not.toBeNull()
    expect(row!.text_blob).toBe(row!.body_blob)
    const items = await listed(apiKey, address.id)
    expect(items.map((m) => m.text_body)).toEqual([await parsedText(small), await parsedText(light.raw)])
  })

  it("keeps in the row a text under 16 KiB, and one that is not the body's bytes (quoted-printable)", async () => {
    const { userId, apiKey, address } = await funded()
    const short = textual(address.email, 8 * 1024, 70 * 1024)
    const qpBody = Array.from({ length: 1_500 }, (_, i) => `mstari ${i} bei =3D TSh 5 ${"q".repeat(40)}`).join("\r\n")
    const qp = plainMessage({ to: address.email, subject: "qp", body: qpBody, extra: "Content-Transfer-Encoding: quoted-printable" })
    await send([address.email], Buffer.from(short.raw))
    await send([address.email], qp)
    const rows = await textsOf(userId)
    expect(rows.map((r) => [r.body_blob !== null, r.text_blob, r.text_range])).toEqual([[true, null, null], [true, null, null]])
    expect(rows[0]!.text_body).toBe(await parsedText(short.raw))
    expect(rows[1]!.text_body).toContain("bei = TSh 5")
    const got = await app.api.call("GET", `/api/inbound/messages/${rows[1]!.id}`, { token: apiKey })
    expect(got.body.data.text_body).toBe(rows[1]!.text_body)
  })

  it("keeps in the row, line ends made LF, a short text of a file-kept body that the quick parse reads (headers under 64 KiB)", async () => {
    const { userId, apiKey, address } = await funded()
    const short = textual(address.email, 8 * 1024, 58 * 1024)
    await send([address.email], Buffer.from(short.raw))
    const [row] = await textsOf(userId)
    expect([row!.body_blob !== null, row!.text_blob, row!.text_range]).toEqual([true, null, null])
    const expected = await parsedText(short.raw)
    expect(expected).toContain("\nmstari 1: bei ni TSh 5")
    expect(row!.text_body).toBe(expected)
    const got = await app.api.call("GET", `/api/inbound/messages/${row!.id}`, { token: apiKey })
    expect(got.body.data.text_body).toBe(expected)
  })

  it("answers 404 for a message whose file went after its row was read, and leaves it out of a page", async () => {
    const { userId, apiKey, address } = await funded()
    await send([address.email], Buffer.from(textual(address.email, 40 * 1024, 30 * 1024).raw))
    await send([address.email], Buffer.from(textual(address.email, 100 * 1024).raw))
    const [light, heavy] = await textsOf(userId)
    // What a reader between a purge's commit and its file's removal finds: the row, no file.
    for (const r of [light!, heavy!]) fs.rmSync(path.join(blobDir, r.text_blob!.slice(-2), r.text_blob!))
    for (const r of [light!, heavy!]) {
      const got = await app.api.call("GET", `/api/inbound/messages/${r.id}`, { token: apiKey })
      expect(got.status).toBe(404)
    }
    expect(await listed(apiKey, address.id)).toEqual([])
  })
})

describe("a start after a crash", () => {
  it("removes the files of batches that never committed, and keeps every stored body", async () => {
    const dns = await startDnsServer(zoneFixture("platform.json"))
    const database = restartableDatabase()
    const settings = { dnsServers: [dns.address], ingestBlobBytes: MIN, dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "blobs-restart-")) }
    const dir = path.join(settings.dataDir, "blobs")
    const first = await makeTestApp({ database: database.next(), workers: false, settings })
    const account = await createAccount(first)
    await fund(first, account.userId, 100)
    const address = await createAddress(first, account.apiKey, unique("crash"))
    const sent = await sendRaw(first.ports.mx!, { from: "alice@sender.example", to: [address.email], raw: sized(address.email, 80 * 1024) })
    expect(sent.data?.code).toBe(250)
    const [stored] = await query<{ body_blob: string }>(first, "SELECT body_blob FROM inbound_mime WHERE user_id = $1", [account.userId])
    await first.stop()
    // What a kill -9 between a body's write and its batch's commit leaves.
    const orphan = `${(Date.now() - 5_000).toString(36)}-0badc0de00000001`
    fs.mkdirSync(path.join(dir, orphan.slice(-2)), { recursive: true })
    fs.writeFileSync(path.join(dir, orphan.slice(-2), orphan), "never committed")
    const past = new Date(Date.now() - 5_000)
    fs.utimesSync(path.join(dir, orphan.slice(-2), orphan), past, past)

    const second = await makeTestApp({ database: database.next(), workers: false, settings: { ...settings, secretsKey: first.settings.secretsKey } })
    try {
      const list = () => fs.readdirSync(dir).flatMap((shard) => fs.readdirSync(path.join(dir, shard)))
      for (let i = 0; i < 100 && list().includes(orphan); i++) await new Promise((r) => setTimeout(r, 50))
      expect(list()).not.toContain(orphan)
      expect(list()).toContain(stored!.body_blob)
    } finally {
      await second.stop()
      await database.drop()
      await dns.close()
      fs.rmSync(settings.dataDir, { recursive: true, force: true })
    }
  })
})
