/**
 * Reading DATA into memory (src/smtp/data.ts): the message is a copy of its own, so the socket's
 * buffers can go at the end of DATA, and `source()` hands those very bytes to the preparer, after
 * which nothing else reads them (effects/ingest/bytes.ts `ownInMemory`). The same over real
 * sockets is in ./mx.test.ts and ./limits.test.ts; this is the contract of the pieces.
 */
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import { PassThrough } from "node:stream"
import { SMTPServer, type SMTPServerDataStream } from "smtp-server"
import { describe, expect, it } from "vitest"
import type { MessageBytes } from "../../effects/ingest/bytes.ts"
import { readMessage, SPOOL_THRESHOLD } from "../../src/smtp/data.ts"
import { MemoryBudget } from "../../src/smtp/limits.ts"
import { connectSmtp, dataBlock } from "../support/smtp-client.ts"

/** readMessage over `chunks` as smtp-server's data stream would give them. */
const read = (chunks: ReadonlyArray<Buffer>, memory = new MemoryBudget(1024 * 1024)) =>
  new Promise<{ message: MessageBytes; finish: () => void; memory: MemoryBudget }>((resolve, reject) => {
    const stream = Object.assign(new PassThrough(), { sizeExceeded: false, byteLength: 0 }) as unknown as SMTPServerDataStream
    readMessage(stream, { maxBytes: 10 * 1024 * 1024, spoolDir: os.tmpdir(), memory }, (err) => err && reject(err), (message, finish) =>
      resolve({ message, finish, memory }))
    for (const c of chunks) stream.write(c)
    stream.end()
  })

const whole = (bytes: Uint8Array) => bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength

describe("a message read into memory", () => {
  it("is a copy of its own: the socket's buffers may change or go after the end of DATA", async () => {
    const chunks = [Buffer.from("Subject: a\r\n\r\n"), Buffer.from("body one\r\n"), Buffer.from("body two\r\n")]
    const expected = Buffer.concat(chunks)
    const { message } = await read(chunks)
    for (const c of chunks) c.fill(0x58)
    expect(message.size).toBe(expected.length)
    expect(Buffer.compare(await message.read(), expected)).toBe(0)
  })

  it("hands the preparer its bytes, the whole of an ArrayBuffer (transferable), and lets nothing read them after", async () => {
    for (const chunks of [[Buffer.from("Subject: one chunk\r\n\r\nbody\r\n")], [Buffer.from("Subject: two\r\n\r\n"), Buffer.from("chunks\r\n")]]) {
      const expected = Buffer.concat(chunks)
      const { message } = await read(chunks)
      const source = message.source()
      expect(source._tag).toBe("Memory")
      const bytes = (source as { bytes: Uint8Array }).bytes
      expect(whole(bytes)).toBe(true)
      expect(Buffer.compare(Buffer.from(bytes), expected)).toBe(0)
      await expect(message.read()).rejects.toThrow(/handed to the preparer/)
      expect(() => message.stream()).toThrow(/handed to the preparer/)
      expect(() => message.source()).toThrow(/handed to the preparer/)
    }
  })

  it("reads as a stream, with a prefix, before it is handed over", async () => {
    const { message } = await read([Buffer.from("Subject: s\r\n\r\n"), Buffer.from("b\r\n")])
    const parts: Array<Buffer> = []
    for await (const c of message.stream(Buffer.from("X-Trace: 1\r\n"))) parts.push(c as Buffer)
    expect(Buffer.concat(parts).toString()).toBe("X-Trace: 1\r\nSubject: s\r\n\r\nb\r\n")
  })

  it("keeps exactly its size from the memory budget until it is finished", async () => {
    const { message, finish, memory } = await read([Buffer.alloc(3000, 0x61), Buffer.alloc(2000, 0x62)])
    expect(memory.used).toBe(message.size)
    finish()
    expect(memory.used).toBe(0)
  })
})

/** `bytes` then `after`, in one ArrayBuffer of exactly that size; the view of `bytes` is what smtp-server hands on. */
const finalRead = (bytes: Buffer, after: string) => {
  const buffer = new ArrayBuffer(bytes.length + after.length)
  const all = Buffer.from(buffer)
  bytes.copy(all)
  all.write(after, bytes.length, "latin1")
  return { buffer, view: Buffer.from(buffer, 0, bytes.length) }
}

describe("the buffer the final dot arrived in", () => {
  const body = (size: number) => Buffer.from(`Subject: big\r\n\r\n${"x".repeat(size)}\r\n`)

  it("is freed once copied when nothing followed the dot: smtp-server would keep it until the 250", async () => {
    const first = body(20_000)
    const { buffer, view } = finalRead(body(30_000), ".\r\n")
    const expected = Buffer.concat([first, view])
    const { message } = await read([first, view])
    expect(buffer.detached).toBe(true)
    expect(Buffer.compare(await message.read(), expected)).toBe(0)
  })

  it("is kept when commands followed the dot in it (pipelining), or it holds other bytes before (a slice of Node's pool)", async () => {
    const pipelined = finalRead(body(30_000), ".\r\nQUIT\r\n")
    await read([pipelined.view])
    expect(pipelined.buffer.detached).toBe(false)

    const bytes = body(100)
    const shared = new ArrayBuffer(50 + bytes.length + 3)
    const after = Buffer.from(shared, 50, bytes.length)
    bytes.copy(after)
    Buffer.from(shared).write(".\r\n", 50 + bytes.length, "latin1")
    await read([after])
    expect(shared.detached).toBe(false)

    const pooled = Buffer.concat([Buffer.from("Subject: small\r\n\r\n"), Buffer.from("body\r\n")])
    await read([pooled])
    expect(pooled.buffer.detached).toBe(false)
  })

  it("is kept when the message went to a spool file (its stream may still be writing it)", async () => {
    const { buffer, view } = finalRead(body(SPOOL_THRESHOLD + 1000), ".\r\n")
    const { message, finish } = await read([view])
    expect(message.source()._tag).toBe("File")
    expect(buffer.detached).toBe(false)
    expect((await message.read()).length).toBe(view.length)
    finish()
    await message.dispose()
  })

  it("goes without losing a byte of any message over one connection, the next commands pipelined after a dot or not", async () => {
    const received: Array<Buffer> = []
    const memory = new MemoryBudget(8 * 1024 * 1024)
    const server = new SMTPServer({
      disabledCommands: ["AUTH", "STARTTLS"],
      logger: false,
      size: 10 * 1024 * 1024,
      onData(stream, _session, callback) {
        readMessage(stream, { maxBytes: 10 * 1024 * 1024, spoolDir: os.tmpdir(), memory }, callback, (message, finish) => {
          void message.read().then((bytes) => {
            received.push(Buffer.from(bytes))
            finish()
            // Answered later, as the MX answers after its batch commits.
            setTimeout(() => callback(null), 5)
          })
        })
      },
    })
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()))
    try {
      const smtp = await connectSmtp((server.server.address() as AddressInfo).port, { waitGreeting: true })
      expect((await smtp.command("EHLO client.sender.example")).code).toBe(250)
      const messages = [100_000, 64 * 1024, 100, 250_000].map((size, i) => Buffer.from(`Subject: ${i}\r\n\r\n${String(i).repeat(size)}\r\n.leading dot\r\n`))
      for (const m of messages) {
        expect((await smtp.command("MAIL FROM:<a@sender.example>")).code).toBe(250)
        expect((await smtp.command("RCPT TO:<b@inbox.localhost>")).code).toBe(250)
        expect((await smtp.command("DATA")).code).toBe(354)
        smtp.write(dataBlock(m))
        expect((await smtp.reply()).code).toBe(250)
      }
      // A last one with the next transaction written right behind its dot.
      const last = Buffer.from(`Subject: last\r\n\r\n${"z".repeat(90_000)}\r\n`)
      expect((await smtp.command("MAIL FROM:<a@sender.example>")).code).toBe(250)
      expect((await smtp.command("RCPT TO:<b@inbox.localhost>")).code).toBe(250)
      expect((await smtp.command("DATA")).code).toBe(354)
      smtp.write(Buffer.concat([dataBlock(last), Buffer.from("RSET\r\nNOOP\r\n")]))
      expect((await smtp.replies(3)).map((r) => r.code)).toEqual([250, 250, 250])
      smtp.destroy()
      expect(received.map((r) => r.toString("latin1"))).toEqual([...messages, last].map((m) => m.toString("latin1")))
      expect(memory.used).toBe(0)
    } finally {
      await new Promise<void>((done) => server.close(() => done()))
    }
  })
})
