/**
 * Resource limits of both SMTP servers over real sockets (DECISIONS.md "Hostile input"): the
 * per-IP session cap (421 4.7.0), the process-wide memory cap (451 4.3.1 for a DATA that finds no
 * room), and large messages spooled to DATA_DIR while they arrive and removed afterwards.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { InboundMessages } from "../../effects/messages/service.ts"
import { SmtpMemory } from "../../src/smtp/limits.ts"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, dataBlock, type RawSmtp } from "../support/smtp-client.ts"
import { createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"
import { plain } from "../sandbox/support.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp({ settings: { smtpMaxSessionsPerIp: 3, smtpMemoryBytes: 256 * 1024 } })
})
afterAll(() => app.stop())

const memoryUsed = () => app.api.run(SmtpMemory.useSync((m) => m.used))
const spoolFiles = () => fs.readdirSync(path.join(app.api.settings.dataDir, "spool"))
const until = async (ok: () => boolean | Promise<boolean>, what: string, ms = 10_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const funded = async () => {
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, 1000)
  const address = await createAddress(app.api, account.apiKey, `lim-${Math.random().toString(16).slice(2, 8)}`)
  return { ...account, address }
}

/** EHLO, MAIL, RCPT, DATA on a fresh MX session; returns it waiting for the message. */
const inData = async (to: string) => {
  const smtp = await connectSmtp(app.mx)
  await smtp.command("EHLO limits.example.net")
  expect((await smtp.command("MAIL FROM:<a@sender.example>")).code).toBe(250)
  expect((await smtp.command(`RCPT TO:<${to}>`)).code).toBe(250)
  expect((await smtp.command("DATA")).code).toBe(354)
  return smtp
}

const lines = (bytes: number) => Buffer.from(`${"B".repeat(1022)}\r\n`.repeat(Math.ceil(bytes / 1024)))

describe.each([["MX", () => app.mx], ["sandbox", () => app.api.ports.sandbox!]] as const)("%s sessions per client IP", (_name, port) => {
  it("takes SMTP_MAX_SESSIONS_PER_IP sessions, refuses the next with 421 4.7.0, and takes one again once a session closed", async () => {
    const open: Array<RawSmtp> = []
    for (let i = 0; i < 3; i++) {
      const s = await connectSmtp(port())
      expect(s.greeting?.code).toBe(220)
      open.push(s)
    }
    const extra = await connectSmtp(port(), { waitGreeting: false })
    const refused = await extra.reply()
    expect([refused.code, refused.text.slice(0, 5)]).toEqual([421, "4.7.0"])
    await extra.closed
    open.shift()!.destroy()
    await new Promise((r) => setTimeout(r, 100))
    const again = await connectSmtp(port())
    expect(again.greeting?.code).toBe(220)
    expect((await again.command("NOOP")).code).toBe(250)
    for (const s of [...open, again]) s.destroy()
  })
})

describe("the memory cap (SMTP_MEMORY_BYTES)", () => {
  it("answers a DATA that finds no room 451 4.3.1, keeps the other message, and takes mail again once memory is free", async () => {
    const { userId, address } = await funded()
    const big = await inData(address.email)
    big.write(`From: a@sender.example\r\nTo: ${address.email}\r\nSubject: big\r\n\r\n`)
    big.write(lines(200 * 1024))
    await until(async () => (await memoryUsed()) >= 200 * 1024, "the first message to fill memory")

    const late = await inData(address.email)
    late.write(dataBlock(plainMessage({ to: address.email, subject: "late" })))
    const refused = await late.reply()
    expect([refused.code, refused.text.slice(0, 5)]).toEqual([451, "4.3.1"])

    big.write(".\r\n")
    expect((await big.reply()).code).toBe(250)
    await until(async () => (await memoryUsed()) === 0, "memory to be given back")
    // The refused sender retries on the same connection: now there is room.
    expect((await late.command("MAIL FROM:<a@sender.example>")).code).toBe(250)
    expect((await late.command(`RCPT TO:<${address.email}>`)).code).toBe(250)
    expect((await late.command("DATA")).code).toBe(354)
    late.write(dataBlock(plainMessage({ to: address.email, subject: "late" })))
    expect((await late.reply()).code).toBe(250)
    for (const s of [big, late]) s.destroy()
    const subjects = await query<{ subject: string }>(app.api, "SELECT subject FROM inbound_messages WHERE user_id = $1 ORDER BY id", [userId])
    expect(subjects.map((s) => s.subject)).toEqual(["big", "late"])
  })
})

describe("large messages", () => {
  it("spool to DATA_DIR while they arrive, are stored byte for byte, and leave no file or memory behind", async () => {
    const { userId, address } = await funded()
    const head = Buffer.from(`From: a@sender.example\r\nTo: ${address.email}\r\nSubject: spooled\r\n\r\n`)
    const body = Buffer.concat([head, lines(3 * 1024 * 1024), Buffer.from("last line \u00e9\r\n", "latin1")])
    const smtp = await inData(address.email)
    smtp.write(body.subarray(0, 2 * 1024 * 1024))
    await until(() => spoolFiles().length > 0, "a spool file")
    // Spooled, the message is not held in memory (at most the reserve of DATAs in progress).
    expect(await memoryUsed()).toBeLessThanOrEqual(64 * 1024)
    smtp.write(body.subarray(2 * 1024 * 1024))
    smtp.write(".\r\n")
    const done = await smtp.reply()
    expect(done.code, done.text).toBe(250)
    smtp.destroy()
    await until(() => spoolFiles().length === 0, "the spool file to go")
    expect(await memoryUsed()).toBe(0)
    const [row] = await query<{ id: number; trace: number; size: number; body_blob: string | null }>(
      app.api,
      `SELECT i.id, length(m.raw) AS trace, m.size_bytes AS size, m.body_blob
         FROM inbound_mime m JOIN inbound_messages i ON i.mime_id = m.id WHERE m.user_id = $1`,
      [userId],
    )
    // Over INGEST_BLOB_BYTES: the row keeps the trace, the body is its spool file linked into DATA_DIR/blobs.
    expect(row!.body_blob).not.toBeNull()
    expect(row!.trace).toBe(row!.size - body.length)
    const stored = await app.api.run(InboundMessages.use((m) => m.raw(userId, row!.id)))
    expect(stored.length).toBe(row!.size)
    expect(Buffer.from(stored).subarray(stored.length - body.length).equals(body)).toBe(true)
  })

  it("leave nothing behind when the client goes away mid-DATA", async () => {
    const { userId, address } = await funded()
    const smtp = await inData(address.email)
    smtp.write(`From: a@sender.example\r\nSubject: cut\r\n\r\n`)
    smtp.write(lines(1536 * 1024))
    await until(() => spoolFiles().length > 0, "a spool file")
    smtp.destroy()
    await until(() => spoolFiles().length === 0, "the spool file to go")
    await until(async () => (await memoryUsed()) === 0, "memory to be given back")
    expect(await query(app.api, "SELECT id FROM inbound_messages WHERE user_id = $1", [userId])).toHaveLength(0)
  })

  it("are captured by the sandbox the same way", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const login = await app.api.call("GET", "/api/sandbox/credentials/smtp", { token: apiKey })
    const { username, password } = login.body.data
    const smtp = await connectSmtp(app.api.ports.sandbox!)
    await smtp.command("EHLO app.example.net")
    expect((await smtp.command(`AUTH PLAIN ${plain(username, password)}`)).code).toBe(235)
    await smtp.command("MAIL FROM:<app@app.example>")
    await smtp.command("RCPT TO:<someone@example.com>")
    expect((await smtp.command("DATA")).code).toBe(354)
    const body = Buffer.concat([Buffer.from("Subject: big capture\r\n\r\n"), lines(2 * 1024 * 1024)])
    smtp.write(dataBlock(body))
    const done = await smtp.reply()
    expect(done.code, done.text).toBe(250)
    smtp.destroy()
    await until(() => spoolFiles().length === 0, "the spool file to go")
    const [row] = await query<{ size: number; raw: string }>(
      app.api,
      "SELECT size, encode(raw, 'base64') AS raw FROM sandbox_messages WHERE user_id = $1",
      [userId],
    )
    expect(row!.size).toBe(body.length)
    expect(Buffer.from(row!.raw, "base64").equals(body)).toBe(true)
    expect(await memoryUsed()).toBe(0)
  })
})
