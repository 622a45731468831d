/**
 * The per-message work of ingest, between the end of DATA and the batch commit: authenticate
 * (SPF/DKIM/DMARC/ARC with mailauth), write the trace (Authentication-Results, Received), parse
 * (mailparser), and encode the message for `ingest_batch_bytes` (migration 031): its row as JSON
 * text, and its bytes (raw MIME, attachments, text and HTML bodies) beside it.
 *
 * It is plain async code, free of Effect and of the runtime's services, because it runs in
 * worker threads (src/ingest/prepare-pool.ts): it is most of a message's CPU (~0.4 ms for 2 KiB,
 * several ms for 100 KiB), and on the event loop it competed with every SMTP session. What it
 * needs from outside comes in as arguments: the bytes (a buffer, or the spool file of a large
 * message), the session facts, the transaction id and time, a DNS resolver (which, in a worker,
 * asks the main thread's Dns port and its TTL cache) and the thread's memo of unsigned mail's
 * verdicts (./verdicts.ts).
 *
 * The trace is never concatenated with the body: the body is parsed alone and the trace's header
 * lines are put in front of its header map; the stored raw MIME is the two joined by the database.
 */
import { createReadStream } from "node:fs"
import { copyFile, link, mkdir, open, readFile, rm, writeFile } from "node:fs/promises"
import * as path from "node:path"
import { authenticate, type Authenticated, type AuthInput, type AuthResults, unsignedHeaders } from "./authenticate.ts"
import { headerLinesOf, type ParsedMessage, parseMail } from "./mime.ts"
import { type MessageColumns, messageColumns } from "./rows.ts"
import { rangedText } from "../shared/ranged-text.ts"
import { smsBodyOf, smsBodyOfBytes } from "../sms/summary.ts"
import { receivedHeader, type TraceInput } from "./trace.ts"
import type { KeptResolver, VerdictMemo } from "./verdicts.ts"

/** Where a received message's bytes are: in memory, or in its spool file (large mail). */
export type MessageSource =
  | { readonly _tag: "Memory"; readonly bytes: Uint8Array }
  | { readonly _tag: "File"; readonly path: string; readonly size: number }

export interface PrepareJob {
  readonly source: MessageSource
  /** MAIL FROM ('' for the null sender of bounces). */
  readonly mailFrom: string
  readonly client: {
    readonly ip: string
    readonly helo: string
    readonly tls: { readonly protocol: string; readonly cipher: string } | null
  }
  /** This MX's host name (authserv-id, Received `by`). */
  readonly mta: string
  /**
   * The SMTP connection already carried a message: its sender sends one message after another
   * over it, waiting for each 250, so the hop to a prepare thread is on the sender's path
   * (src/ingest/prepare-pool.ts `placed`). Unset for a connection's first message.
   */
  readonly reusedConnection?: boolean
  /** The transaction id written into the Received line. */
  readonly id: string
  /** When the message was received (ms since the epoch; the main thread's Clock). */
  readonly at: number
  /** Set for a large message: its body goes to this file (effects/ports/MimeBlobs.ts), not into its row. */
  readonly blob?: { readonly key: string; readonly path: string }
}

/** What the event loop reads of a prepared message wherever its row and bytes are. */
export interface MessageSummary {
  /** Bytes stored: trace + body. */
  readonly size: number
  /** What subscribers (webhooks, SMS, agent) are told about each stored copy. */
  readonly fromAddr: string
  readonly subject: string
  /**
   * The text body as far as an SMS summary reads it (`smsBodyOf`): the body itself is in `bytes`.
   * Unset when the database makes the text from the raw MIME (`text_crlf`): the string was never
   * made, and an SMS summary reads the stored text (effects/sms/delivery.ts).
   */
  readonly smsBody?: string
  /** Set when authentication failed or timed out (the message is stored with `temperror` verdicts). */
  readonly authFailure?: string
  /** The blob key of a body written to a file (the job's `blob`): removed again if the message is refused. */
  readonly bodyBlob?: string
}

/** A message ready for the writer, its row and bytes in hand. */
export interface PreparedMessage extends MessageSummary {
  /**
   * The message's element of `ingest_batch_bytes`'s `messages` as UTF-8 JSON (the columns, and
   * where each piece is in `bytes`), in an ArrayBuffer of its own: a worker transfers it to the
   * event loop, never copied.
   */
  readonly row: Uint8Array
  /**
   * The trace and body (the raw MIME), each part's content, the text (unless the row names it
   * within the raw MIME: `text_crlf`) and HTML bodies as UTF-8, in that order; its own ArrayBuffer too.
   */
  readonly bytes: Uint8Array
}

/**
 * A message prepared on the database's own thread (PGlite's, src/ingest/prepare-host.ts) and kept
 * there for the statement that stores it: only its summary came back to the event loop, and the
 * batch names it by `kept` (./batch-parameters.ts). `release` lets that thread drop it; the
 * writer calls it once no statement will name it again.
 */
export interface KeptMessage extends MessageSummary {
  readonly kept: KeptRef
  /** Length of its bytes as `PreparedMessage.bytes` would have them (the batch's byte cap reads it). */
  readonly byteLength: number
  readonly release: () => void
}

/** Where a kept message is: the host port it was prepared through, and its job there. */
export interface KeptRef {
  readonly key: number
  readonly id: number
}

/** A message the writer can store: in hand, or kept on the database's thread. */
export type ReadyMessage = PreparedMessage | KeptMessage

/**
 * A text body at least this large, in a message whose body is kept as a file, is read from that
 * file (migration 042, ../messages/blob-text.ts) instead of being stored again in its row: a
 * plain message's body, or the one text/plain part of a multipart/alternative (./mime-quick.ts
 * `textRange`; its HTML part stays in the row). On
 * PGlite the second copy went through its WebAssembly page by page, into TOAST and the WAL: 100 KiB
 * plain mail over 20 sessions without it 195.5 → 278.5 msgs/s at 7.56 → 4.86 ms of CPU a message
 * and 270–273 → 247–253 MiB peak RSS (six interleaved pairs, every one faster; bench/REPORT.md, MX
 * ingest, thirty-ninth session). A smaller text stays in its row, where a page of messages reads it
 * without opening a file.
 */
export const TEXT_IN_BLOB_BYTES = 16 * 1024

/**
 * The message's row and bytes. The bytes are copied once into a buffer of their own; the row
 * names them by [offset, length], so no byte is base64-encoded or JSON-escaped here, nor lexed as
 * JSON by the database (PostgreSQL 15 reads a JSON string one character at a time).
 */
const encodeMessage = (
  trace: Buffer,
  /** The body, or the key of the file it is in (only the trace then goes into the row's bytes). */
  body: Buffer | { readonly blob: string },
  columns: MessageColumns & Record<string, unknown>,
  attachments: ParsedMessage["attachments"],
  /** Where the text body is in `body` as its bytes with CR LF for LF (ParsedMessage `textRange`). */
  textRange: ParsedMessage["textRange"],
): { readonly row: Uint8Array; readonly bytes: Uint8Array } => {
  const { text_body, html_body, ...rest } = columns
  const inRow = Buffer.isBuffer(body) ? body : undefined
  // Such a text is not sent again: the database reads it from the raw MIME (`text_crlf`, migration 039).
  const textInRaw = inRow && textRange
  // Nor stored again: readers take it from the body's file (`text_range`, migration 042).
  const textInBlob = !inRow && textRange && textRange[1] - textRange[0] >= TEXT_IN_BLOB_BYTES ? textRange : undefined
  const size = trace.length + (inRow?.length ?? 0) + attachments.reduce((n, a) => n + a.content.byteLength, 0) +
    (textInRaw || textInBlob ? 0 : Buffer.byteLength(text_body, "utf8")) + Buffer.byteLength(html_body, "utf8")
  const bytes = Buffer.allocUnsafeSlow(size)
  let at = 0
  const put = (piece: Uint8Array): [number, number] => {
    bytes.set(piece, at)
    at += piece.byteLength
    return [at - piece.byteLength, piece.byteLength]
  }
  const write = (text: string): [number, number] => {
    const n = bytes.write(text, at, "utf8")
    at += n
    return [at - n, n]
  }
  put(trace)
  if (inRow) put(inRow)
  const parts = attachments.map((a, position) => ({
    position,
    filename: a.filename,
    content_type: a.contentType,
    content_id: a.contentId,
    size: a.content.byteLength,
    content: put(a.content),
  }))
  const raw = [0, trace.length + (inRow?.length ?? 0)]
  const text = textInRaw
    ? { text: [trace.length + textRange[0], textRange[1] - textRange[0]], text_crlf: true }
    : textInBlob
    ? { text: write(""), text_range: [textInBlob[0], textInBlob[1] - textInBlob[0]] }
    : { text: write(text_body) }
  const row = { raw, ...(inRow ? {} : { body_blob: (body as { blob: string }).blob }), ...text, html: write(html_body), parts, ...rest }
  // Both in ArrayBuffers of their own, transferable: TextEncoder's is exactly the text's, and
  // allocUnsafeSlow's is never a slice of the shared pool.
  return { row: new TextEncoder().encode(JSON.stringify(row)), bytes: new Uint8Array(bytes.buffer, 0, at) }
}

const bytesOf = (s: MessageSource) => (s._tag === "Memory" ? Buffer.from(s.bytes.buffer, s.bytes.byteOffset, s.bytes.byteLength) : undefined)

/** Bytes a spooled message's header block is looked for in (authentication needs no more when unsigned). */
const HEAD_BYTES = 256 * 1024

/** A spooled message's header block, when it is unsigned and within HEAD_BYTES (else undefined: read it all). */
const headOfFile = async (source: { readonly path: string }): Promise<Buffer | undefined> => {
  const file = await open(source.path, "r")
  try {
    const { buffer, bytesRead } = await file.read(Buffer.alloc(HEAD_BYTES), 0, HEAD_BYTES, 0)
    return unsignedHeaders(buffer.subarray(0, bytesRead))
  } finally {
    await file.close()
  }
}

/** Directories of blob files already made by this thread. */
const madeDirs = new Set<string>()

/**
 * The body written to its blob file, whole, before the row naming it can commit. A spool file is
 * linked (the spool's own name is removed when the session is done with it); copied where the
 * two directories are on different filesystems.
 */
const keepBody = async (source: MessageSource, file: string): Promise<void> => {
  const dir = path.dirname(file)
  if (!madeDirs.has(dir)) {
    await mkdir(dir, { recursive: true })
    madeDirs.add(dir)
  }
  if (source._tag === "Memory") return writeFile(file, source.bytes)
  await link(source.path, file).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== "EXDEV" && e.code !== "EPERM") throw e
    return copyFile(source.path, file)
  })
}

/** Authenticates, parses and encodes one message; rejects only when its bytes cannot be read or kept. */
export const prepareMessage = async (
  job: PrepareJob,
  resolver: KeptResolver,
  verdicts?: VerdictMemo<Authenticated>,
): Promise<PreparedMessage> => {
  if (!job.blob) return prepareRow(job, resolver, verdicts, undefined)
  // The body is written while the message is authenticated and parsed; removed again if that fails.
  const kept = keepBody(job.source, job.blob.path)
  kept.catch(() => undefined)
  try {
    return await prepareRow(job, resolver, verdicts, kept)
  } catch (e) {
    await kept.catch(() => undefined)
    await rm(job.blob.path, { force: true })
    throw e
  }
}

const prepareRow = async (
  job: PrepareJob,
  resolver: KeptResolver,
  verdicts: VerdictMemo<Authenticated> | undefined,
  /** The body's write to its blob file (with `job.blob`). */
  kept: Promise<void> | undefined,
): Promise<PreparedMessage> => {
  const buffer = bytesOf(job.source)
  const openFile = () => createReadStream((job.source as { path: string }).path)
  const stream = () => buffer ?? openFile()
  const size = buffer ? buffer.length : (job.source as { size: number }).size

  const input: AuthInput = { ip: job.client.ip, helo: job.client.helo, sender: job.mailFrom, mta: job.mta }
  const auth = await authenticate(buffer ?? (await headOfFile(job.source as { path: string })) ?? stream(), input, resolver, verdicts)
  const trace: TraceInput = { ...job.client, mta: job.mta, id: job.id, at: new Date(job.at) }
  const traceText = auth.headers + receivedHeader(trace)
  const traceBytes = Buffer.from(traceText, "utf8")

  // A text that is a range of the body is made into a string only where something here reads it
  // (`text` '' otherwise): the database makes the text of a body kept in its row (`text_crlf`),
  // readers take a long one from the body's file, and the SMS summary reads what it needs.
  const parsed = await parseMail(buffer ?? openFile, headerLinesOf(traceText), { rangedTextUnread: true })
  const range = parsed.textRange && buffer ? buffer.subarray(parsed.textRange[0], parsed.textRange[1]) : undefined
  // A body kept as a file with a text too short to read from the file: its row holds the text.
  const rowText = range && job.blob && range.length < TEXT_IN_BLOB_BYTES ? rangedText(range) : undefined
  const columns = messageColumns(rowText === undefined ? parsed : { ...parsed, text: rowText }, job.mailFrom)
  // What an SMS summary reads of the text; none for a body kept in its row with a ranged text,
  // whose summary reads the stored text (effects/sms/delivery.ts).
  const smsBody = !range
    ? smsBodyOf(parsed.text)
    : rowText !== undefined
    ? smsBodyOf(rowText)
    : job.blob
    ? smsBodyOfBytes(range)
    : undefined
  const body = job.blob ? { blob: job.blob.key } : buffer ?? (await readFile((job.source as { path: string }).path))
  await kept
  const { row, bytes } = encodeMessage(traceBytes, body, {
    size: traceBytes.length + size,
    at: new Date(job.at).toISOString(),
    ...columns,
    // Already safe: every string of the verdicts was made `pgSafe` where they were read (./authenticate.ts).
    auth_results: auth.results satisfies AuthResults,
    tls: job.client.tls,
  }, parsed.attachments, parsed.textRange)
  return {
    row,
    bytes,
    size: traceBytes.length + size,
    fromAddr: columns.from_addr,
    subject: parsed.subject,
    ...(smsBody === undefined ? {} : { smsBody }),
    ...(auth.failure ? { authFailure: auth.failure } : {}),
    ...(job.blob ? { bodyBlob: job.blob.key } : {}),
  }
}
