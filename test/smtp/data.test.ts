/**
 * Reading DATA into memory (src/smtp/data.ts): the message is a copy of its own, so the socket's
 * buffers can go at the end of DATA, and `source()` hands those very bytes to the preparer, after
 * which nothing else reads them (effects/ingest/bytes.ts `ownInMemory`). The same over real
 * sockets is in ./mx.test.ts and ./limits.test.ts; this is the contract of the pieces.
 */
import * as os from "node:os"
import { PassThrough } from "node:stream"
import type { SMTPServerDataStream } from "smtp-server"
import { describe, expect, it } from "vitest"
import type { MessageBytes } from "../../effects/ingest/bytes.ts"
import { readMessage } from "../../src/smtp/data.ts"
import { MemoryBudget } from "../../src/smtp/limits.ts"

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
