/**
 * A received message's bytes, wherever they are: in memory (most mail) or in a spool file (large
 * mail, src/smtp/spool.ts). Authentication and parsing read them as streams, so a large message
 * is never held as one buffer next to its copies, and the trace header goes in front of the
 * stream instead of being concatenated with the body.
 */
import { Readable } from "node:stream"
import type { MessageSource } from "./prepare.ts"

export interface MessageBytes {
  readonly size: number
  /** A fresh stream of the bytes, `prefix` (the trace header) first. */
  readonly stream: (prefix?: Uint8Array) => Readable
  /** Every byte at once (reads a spool file). */
  readonly read: () => Promise<Buffer>
  /** Lets go of the bytes (removes a spool file); idempotent. */
  readonly dispose: () => Promise<void>
  /**
   * The bytes for the prepare step: in memory, one contiguous copy of its own (never a slice of
   * a pooled buffer, so it can be transferred to a worker thread); spooled, the file's path.
   */
  readonly source: () => MessageSource
}

/** `size` bytes from `chunks` in a fresh ArrayBuffer of exactly that size (transferable). */
export const ownedCopy = (chunks: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  const out = new Uint8Array(size)
  let at = 0
  for (const c of chunks) {
    out.set(c, at)
    at += c.byteLength
  }
  return out
}

/** Bytes held in memory, as the chunks they arrived in. */
export const inMemory = (data: Uint8Array | ReadonlyArray<Uint8Array>): MessageBytes => {
  const chunks = (data instanceof Uint8Array ? [data] : data).map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength))
  const size = chunks.reduce((n, c) => n + c.length, 0)
  return {
    size,
    stream: (prefix) => Readable.from(prefix && prefix.length > 0 ? [Buffer.from(prefix), ...chunks] : chunks, { objectMode: false }),
    read: async () => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)),
    dispose: async () => undefined,
    source: () => ({ _tag: "Memory", bytes: ownedCopy(chunks, size) }),
  }
}

/**
 * Bytes in memory that no one else holds (readMessage's copy of a message as it arrived):
 * `source()` hands these very bytes to the preparer, which may move them to its thread and free
 * them, so nothing reads them after that (read and stream throw). The socket's buffers are let go
 * as each chunk is copied: held until the 250 they outlived two scavenges, and under 100 KiB mail
 * ~40 MB of them waited in the old generation for each full GC (bench/REPORT.md, MX ingest,
 * 2026-11-27 sixth session).
 */
export const ownInMemory = (bytes: Uint8Array): MessageBytes => {
  let handedOver = false
  const view = () => {
    if (handedOver) throw new Error("the message's bytes were handed to the preparer")
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }
  return {
    size: bytes.byteLength,
    stream: (prefix) => Readable.from(prefix && prefix.length > 0 ? [Buffer.from(prefix), view()] : [view()], { objectMode: false }),
    read: async () => view(),
    dispose: async () => undefined,
    source: () => {
      view()
      handedOver = true
      return { _tag: "Memory", bytes }
    },
  }
}

export const isMessageBytes = (u: unknown): u is MessageBytes =>
  typeof u === "object" && u !== null && !(u instanceof Uint8Array) && typeof (u as MessageBytes).stream === "function"
