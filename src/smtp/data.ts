/**
 * Reading DATA with bounded memory. A message stays in memory while it is small (up to
 * SPOOL_THRESHOLD) and the process-wide budget (SMTP_MEMORY_BYTES) has room; past either it
 * goes on to a spool file in DATA_DIR/spool while it arrives, so its size never shows in the
 * process. A large message then waits for budget before it is worked on (authentication, parsing
 * and storing hold it in memory). When the budget has no room left for a new message's first
 * bytes (DATA_RESERVE), that DATA is answered `451 4.3.1` (smtp-server drains the body first: it
 * sends 354 before the handler runs).
 *
 * A client that leaves before the final dot gets 451 and nothing is handed on; an oversized
 * message gets 552. Every path gives back its memory and removes its spool file.
 *
 * Free of Effect: the MX's protocol thread (./mx-thread.ts) reads DATA with `readData` and hands
 * the result to the event loop, which opens it with `openRead`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Readable } from "node:stream"
import type { SMTPServerDataStream } from "smtp-server"
import { type MessageBytes, ownedCopy, ownInMemory } from "../../effects/ingest/bytes.ts"
import { freeBytes } from "../../effects/shared/free-bytes.ts"
import { isDeno } from "../is-deno.ts"
import { type Budget, MEMORY_FULL } from "./budget.ts"
import { smtpError } from "./smtp-error.ts"

/** Messages larger than this are spooled to disk while they arrive. */
export const SPOOL_THRESHOLD = 1024 * 1024
/** What a DATA must find free in the budget to start (its first bytes' room). */
export const DATA_RESERVE = 64 * 1024

export interface DataOptions {
  readonly maxBytes: number
  readonly spoolDir: string
  readonly memory: Budget
  /** Put after the pid in spool files' names (the MX's thread: its files, found if it dies). */
  readonly spoolTag?: string
}

/**
 * A message read in full, in memory (a buffer of its own, transferable to another thread) or in a
 * spool file; `held` bytes of the budget are its until it has been answered.
 */
export type DataRead =
  | { readonly _tag: "Memory"; readonly bytes: Uint8Array; readonly held: number }
  | { readonly _tag: "File"; readonly path: string; readonly size: number; readonly held: number }

/** A message read in full; `finish` gives back its memory and spool file once it has been answered. */
export type Complete = (message: MessageBytes, finish: () => void) => void

const spooled = (file: string, size: number): MessageBytes => ({
  size,
  stream: (prefix) =>
    Readable.from((async function*() {
      if (prefix && prefix.length > 0) yield Buffer.from(prefix)
      yield* fs.createReadStream(file)
    })()),
  read: () => fs.promises.readFile(file),
  dispose: () => fs.promises.rm(file, { force: true }),
  source: () => ({ _tag: "File", path: file, size }),
})

/** The spool directory, created, with files left by processes that are gone removed. */
export const prepareSpool = (dataDir: string): string => {
  const dir = path.join(dataDir, "spool")
  fs.mkdirSync(dir, { recursive: true })
  for (const name of fs.readdirSync(dir)) {
    const pid = Number(/^(\d+)-/.exec(name)?.[1])
    if (pid === process.pid || isAlive(pid)) continue
    fs.rmSync(path.join(dir, name), { force: true })
  }
  return dir
}

const isAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as { code?: string }).code === "EPERM"
  }
}

/** The read message's bytes, and the `finish` that gives back its budget and spool file. */
export const openRead = (read: DataRead, memory: Budget): { message: MessageBytes; finish: () => void } =>
  read._tag === "Memory"
    ? { message: ownInMemory(read.bytes), finish: () => memory.release(read.held) }
    : {
      message: spooled(read.path, read.size),
      finish: () => {
        memory.release(read.held)
        fs.rm(read.path, { force: true }, () => undefined)
      },
    }

/** Reads a DATA with bounded memory; `complete` gets the message, `callback` a refusal. */
export const readMessage = (
  stream: SMTPServerDataStream,
  options: DataOptions,
  callback: (err: Error | null) => void,
  complete: Complete,
) =>
  readData(stream, options, callback, (read) => {
    const { message, finish } = openRead(read, options.memory)
    complete(message, finish)
  })

/** Spool files are named by process (`prepareSpool` removes those of processes that are gone). */
export const spoolPrefix = (tag = "") => `${process.pid}-${tag}`
const spoolName = (tag?: string) => `${spoolPrefix(tag)}${Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")}.eml`

/**
 * Frees the buffer the final dot arrived in, once its bytes are copied, when nothing came after
 * the dot. smtp-server gives DATA's last bytes as a view of that buffer and keeps the view of
 * what followed the dot (empty here) until the message has been answered, to read it as the next
 * command. Held past the batch's commit, the buffer (up to a socket read, 64 KiB) outlived two
 * scavenges and waited in the old generation for a full GC. Under 100 KiB mail the MX's thread
 * (MX_THREAD) piled up 30–36 MB of them (4 MB since); on PGlite peak RSS went 245–255 → 231–243
 * MiB at +3.3 % msgs/s, on PostgreSQL level (six interleaved pairs each; bench/REPORT.md, MX
 * ingest, forty-third session).
 *
 * Only a buffer that holds nothing else: the view is all of it but the dot's line, from its first
 * byte, so what smtp-server keeps after the dot is empty, and it is no slice of Node's pool of
 * small buffers (a slice from the pool's first byte is smaller than half the pool, so it never
 * reaches the pool's end). Not under Deno, whose sockets may read into buffers of their own making.
 */
export const freeFinalRead = (last: Uint8Array | undefined): void => {
  const buffer = last?.buffer
  if (isDeno || !(buffer instanceof ArrayBuffer) || buffer.detached) return
  if (last!.byteOffset !== 0 || last!.byteLength + FINAL_DOT.length !== buffer.byteLength) return
  buffer.transfer(0)
}
/** What ends DATA after the message's last line break (smtp-server keeps the bytes after it). */
const FINAL_DOT = ".\r\n"

/** Reads a DATA as `readMessage` does; `complete` gets what was read, for the thread that opens it. */
export const readData = (
  stream: SMTPServerDataStream,
  options: DataOptions,
  callback: (err: Error | null) => void,
  complete: (read: DataRead) => void,
) => {
  const { memory } = options
  // No room for even the first bytes: refused before one is kept; smtp-server reads the rest of
  // the message and answers this.
  let held = Math.min(DATA_RESERVE, memory.capacity)
  if (!memory.tryTake(held)) return callback(smtpError(MEMORY_FULL))

  const chunks: Array<Buffer> = []
  /** Bytes in `chunks`; `held` (taken from the budget) is at least that. */
  let kept = 0
  let total = 0
  let spool: { readonly file: string; readonly out: fs.WriteStream } | undefined
  let failed = false

  const dropMemory = () => {
    chunks.length = 0
    memory.release(held)
    held = 0
    kept = 0
  }
  const dropSpool = () => {
    if (!spool) return
    const { file, out } = spool
    out.destroy()
    fs.rm(file, { force: true }, () => undefined)
  }
  const fail = (error: Error) => {
    if (failed) return
    failed = true
    dropMemory()
    dropSpool()
    stream.resume()
    callback(error)
  }
  const startSpool = () => {
    const file = path.join(options.spoolDir, spoolName(options.spoolTag))
    const out = fs.createWriteStream(file, { flags: "wx", mode: 0o600 })
    out.on("error", () => fail(smtpError({ code: 451, message: "4.3.0 Local error in processing, try again later" })))
    spool = { file, out }
    for (const c of chunks) out.write(c)
    dropMemory()
  }

  /** The last bytes given: the final dot's buffer once DATA has ended (`freeFinalRead`). */
  let last: Buffer | undefined
  stream.on("data", (chunk: Buffer) => {
    last = chunk
    total += chunk.length
    if (failed) return
    // Past the limit the bytes are only counted (by smtp-server too): the answer is 552 anyway.
    if (total > options.maxBytes) {
      dropMemory()
      dropSpool()
      spool = undefined
      return
    }
    const need = kept + chunk.length
    if (!spool && need <= SPOOL_THRESHOLD && (need <= held || memory.tryTake(need - held))) {
      held = Math.max(held, need)
      // A copy of our own: the socket's buffer is let go at once (effects/ingest/bytes.ts `ownInMemory`).
      const own = Buffer.allocUnsafeSlow(chunk.length)
      chunk.copy(own)
      chunks.push(own)
      kept = need
      return
    }
    if (!spool) startSpool()
    if (!spool!.out.write(chunk)) {
      stream.pause()
      spool!.out.once("drain", () => stream.resume())
    }
  })
  // The client left before the final dot: drop what we have, store and charge nothing.
  stream.once("error", () => fail(smtpError({ code: 451, message: "4.4.2 Connection lost during DATA" })))
  stream.once("end", () => {
    if (failed) return
    if (stream.sizeExceeded || total > options.maxBytes) {
      failed = true
      dropMemory()
      dropSpool()
      return callback(smtpError({ code: 552, message: `5.3.4 Message exceeds the size limit of ${options.maxBytes} bytes` }))
    }
    if (!spool) {
      // Copied (a spool file's stream may still be writing its bytes, so not there).
      freeFinalRead(last)
      // Keep what the message takes, give back the rest of the reserve.
      memory.release(held - kept)
      const mine = kept
      held = 0
      // One buffer of its own for the preparer; the chunks' copies are freed once joined.
      const bytes = chunks.length === 1 ? chunks[0]! : ownedCopy(chunks, kept)
      if (chunks.length > 1) for (const c of chunks) freeBytes(c)
      chunks.length = 0
      return complete({ _tag: "Memory", bytes, held: mine })
    }
    const { file, out } = spool
    out.end(() => {
      if (failed) return
      // Worked on only when the budget has room for it.
      memory.take(total).then((held) => complete({ _tag: "File", path: file, size: total, held }))
    })
  })
}
