/**
 * The common shapes of mail parsed in one synchronous pass, with exactly the result mailparser's
 * `simpleParser` gives for them; `undefined` for anything else, which then goes to mailparser.
 *
 * Why: for a 2 KiB message mailparser's streams (a Transform per MIME node, a `setImmediate` per
 * chunk, every header decoded) were over half of a prepare thread's CPU, the largest piece of the
 * MX's per-message cost after the socket writes (bench/REPORT.md, MX ingest, 2026-11-27 fifth
 * session). The shapes taken here:
 * - a single text/plain part (no Content-Type at all counts as one);
 * - multipart/alternative whose children are all inline text/plain or text/html parts.
 * Each text part must be UTF-8 or ASCII, not format=flowed, in 7bit/8bit/binary,
 * quoted-printable or well-formed base64. Attachments, other charsets, nesting, HTML-only mail
 * (whose text mailparser derives from the HTML) and anything irregular (a missing closing
 * boundary, a header-only part, overlong lines or header blocks) are left to mailparser.
 *
 * Exactness comes from doing what mailparser does with its own pieces: mailsplit's MimeNode reads
 * each header block (content type, charset, encoding, disposition, the raw header lines), its
 * transfer decoders decode the bodies, From, Subject and Message-ID are read with MailParser's own
 * header processing and its libmime (`headerFields`; a From that is one plain address needs
 * neither), and the boundary lines are matched as mailsplit's splitter matches them.
 * test/inbound/mime-quick.test.ts compares the two over the mail corpus and generated mail.
 */
import mailsplit from "@zone-eu/mailsplit"
import { isUtf8 } from "node:buffer"
import type { AddressObject, SimpleParserOptions } from "mailparser"
import { MailParser } from "mailparser"

/**
 * What this module gives: the part of simpleParser's result that ./mime.ts reads. Of the From
 * field, only its addresses (`value`): mailparser's HTML and text renderings of it are not made.
 */
export interface QuickMail {
  readonly from?: Pick<AddressObject, "value">
  readonly subject?: string
  readonly messageId?: string
  readonly text?: string
  readonly html?: string
  readonly headerLines: ReadonlyArray<{ key: string; line: string }>
  readonly attachments: ReadonlyArray<never>
  /**
   * Where `text` is in the message's bytes, when it is exactly those bytes read as UTF-8 with every
   * CR LF made LF (one text/plain part, alone or as the only text/plain of a multipart/alternative,
   * in 7bit, 8bit or binary, valid UTF-8, no NUL): the database can then make it from the raw MIME
   * it stores anyway (./prepare.ts), and it is not sent twice.
   */
  readonly textRange?: readonly [start: number, end: number]
}

/** How `parse` treats a text that a range names. */
export interface QuickParseOptions {
  /** Left as bytes: the result has the range and no `text` (its reader takes the bytes). */
  readonly rangedTextUnread?: boolean
}

type MimeNode = InstanceType<typeof mailsplit.MimeNode>
/** The parts of a MailParser that header fields are read with. */
interface HeaderProcessor {
  processHeaders(lines: ReadonlyArray<{ key: string; line: string }>): Map<string, unknown>
  getAddressesHTML(value: unknown): string
  getAddressesText(value: unknown): string
  ensureMessageIDFormat(value: string): string | false
  readonly libmime: {
    decodeHeader(line: string): { key: string; value: string }
    decodeWords(value: string): string
  }
}

/**
 * Past this a header block is left to mailparser (its own limit, 1 MiB, must stay mailparser's to
 * enforce); also what `headOnly` reads of mail mailparser gave up on.
 */
export const HEAD_LIMIT = 64 * 1024
/**
 * Past this a line of a multipart message is left to mailparser: mailsplit flushes lines of
 * 64 KiB or more in pieces and never reads their rest as a boundary.
 */
const LINE_LIMIT = 32 * 1024
/** mailsplit's BOUNDARY_LINE_SUFFIX: "--" prefix, "--" suffix, CRLF. */
const BOUNDARY_LINE_SUFFIX = 6
/** What libmime's decodeWords puts between encoded words it joins, then removes. */
const JOIN_MARK = "__\x00JOIN\x00__"
/** The transfer encodings `transferDecoded` decodes; any other leaves a body's bytes as they are. */
const TRANSFER_DECODED: ReadonlySet<unknown> = new Set(["base64", "quoted-printable"])
/** The root headers mailparser's result is read from here. */
const RESULT_HEADERS = new Set(["from", "subject", "message-id"])

const LF = 0x0a
const CR = 0x0d
const CRLF = Buffer.from("\r\n")
const DASH = 0x2d

/**
 * One address and nothing else, bare or in angle brackets, of characters that nodemailer's
 * addressparser reads as they are: no display name, quote, comment, group, encoded word or
 * punycode domain (`xn--`), which are left to it.
 */
const PLAIN_ADDRESS = /^(?:<([\w.+-]+@[\w.-]+)>|([\w.+-]+@[\w.-]+))$/

/**
 * A From value that is one plain address (`PLAIN_ADDRESS`), as addressparser and mailparser's
 * decodeAddresses give it: the address alone, with an empty name. Most mail's From is a name and
 * an address, but machine-sent mail's is often this, and addressparser walks it a character at a
 * time (~5 µs). Undefined for anything else.
 */
const plainFrom = (value: string): QuickMail["from"] => {
  const m = PLAIN_ADDRESS.exec(value)
  const address = m?.[1] ?? m?.[2]
  if (address === undefined || /xn--/i.test(address)) return undefined
  return { value: [{ address, name: "" }] }
}

/** mailsplit's MessageSplitter.compareBoundary: 1 a delimiter, 2 the closing one, else false. */
const compareBoundary = (line: Buffer, start: number, boundary: Buffer): 1 | 2 | false => {
  if (line.length < boundary.length + 3 + start || line.length > boundary.length + BOUNDARY_LINE_SUFFIX + start) return false
  for (let i = 0; i < boundary.length; i++) if (line[i + 2 + start] !== boundary[i]) return false
  let pos = 0
  for (let i = boundary.length + 2 + start; i < line.length; i++) {
    const c = line[i]
    if (pos === 0 && (c === CR || c === LF)) return 1
    if ((pos === 0 || pos === 1) && c !== DASH) return false
    if (pos === 2 && c !== CR && c !== LF) return false
    if (pos === 3 && c !== LF) return false
    pos++
  }
  return 2
}

/** mailsplit's checkBoundary against one boundary: a leading CR, LF or CRLF is skipped first. */
const boundaryLine = (line: Buffer, boundary: Buffer): 1 | 2 | false => {
  let start = 0
  if (line.length >= 1 && (line[0] === CR || line[0] === LF)) {
    start++
    if (line.length >= 2 && line[0] === CR && line[1] === LF) start++
  }
  if (line.length < 4 || line[start] !== DASH || line[start + 1] !== DASH) return false
  return compareBoundary(line, start, boundary)
}

/** Whether the line `buf[from, to)` (with its line ending) is the empty line that ends a header block. */
const isBlank = (buf: Buffer, from: number, to: number) => to - from === 1 ? buf[from] === LF : to - from === 2 && buf[from] === CR && buf[from + 1] === LF

/** End of the line starting at `from` (after its LF, or the end of the buffer). */
const lineEnd = (buf: Buffer, from: number) => {
  const nl = buf.indexOf(LF, from)
  return nl < 0 ? buf.length : nl + 1
}

/**
 * The transfer-decoded bytes, through mailsplit's own decoder for the node's encoding, run at once
 * on the whole body (mailparser runs it on the body's chunks: the same bytes for the encodings
 * taken here). Undefined for base64 that is not well formed, where chunking could matter.
 */
const transferDecoded = (node: MimeNode, body: Buffer): Buffer | undefined => {
  if (!TRANSFER_DECODED.has(node.encoding)) return body
  if (node.encoding === "base64") {
    const text = body.toString("latin1")
    // The decoder reads the bytes as ASCII (top bit dropped) and keeps only the alphabet.
    if (/[^\x00-\x7f]/.test(text)) return undefined
    const b64 = text.replace(/[^a-zA-Z0-9+/=]/g, "")
    if (b64.length % 4 !== 0 || !/^[a-zA-Z0-9+/]*={0,2}$/.test(b64)) return undefined
  }
  const decoder = node.getDecoder() as unknown as {
    push: (b: Buffer | null) => boolean
    _transform: (chunk: Buffer, encoding: string, done: () => void) => void
    _flush: (done: () => void) => void
  }
  const out: Array<Buffer> = []
  // Both decoders push synchronously from _transform/_flush (their `done` only paces the stream).
  decoder.push = (b) => (b && out.push(b), true)
  decoder._transform(body, "buffer", () => undefined)
  decoder._flush(() => undefined)
  return Buffer.concat(out)
}

/** Whether mailparser decodes a text part as `textOf` does: not format=flowed, in UTF-8 or ASCII. */
const decodedAsUtf8 = (node: MimeNode): boolean => {
  if (node.flowed) return false
  const charset = (node.charset || "utf-8").toLowerCase().replace(/[^a-z0-9]+/g, "")
  return charset === "ascii" || charset === "usascii" || charset === "utf8"
}

/** A text part's content as mailparser's `textContent`, or undefined when mailparser would decode it otherwise. */
const textOf = (node: MimeNode, body: Buffer): string | undefined => {
  if (!decodedAsUtf8(node)) return undefined
  const decoded = transferDecoded(node, body)
  if (!decoded) return undefined
  // A short text is decoded, then its line ends replaced: ~6× faster than `lfOnly` at 2 KiB (1.1
  // against 6.2 µs), though its result is a rope of the pieces, flattened by its first reader.
  // Past SHORT_TEXT the rope would be a second copy of a large text on the heap: `lfOnly`.
  return decoded.length <= SHORT_TEXT ? decoded.toString().replaceAll("\r\n", "\n") : lfOnly(decoded).toString()
}

/** Bytes of decoded text up to which `textOf` replaces line ends in the string (see there). */
const SHORT_TEXT = 16 * 1024

/**
 * `bytes` with every CR LF made LF: what mailparser's `.replace(/\r?\n/g, "\n")` does to the
 * decoded text, done on the bytes (CR and LF are ASCII and never inside a UTF-8 sequence, so the
 * decode gives the same string). The text comes out of one decode as one flat string: the
 * regular-expression replace built a rope of 100 KiB mail's ~1,300 lines, which the first
 * `includes` (pgSafe) then copied flat, twice the text's size on the heap per message.
 */
const lfOnly = (bytes: Buffer): Buffer => {
  let cr = bytes.indexOf(CRLF)
  if (cr < 0) return bytes
  const out = Buffer.allocUnsafe(bytes.length)
  let from = 0
  let at = 0
  while (cr >= 0) {
    at += bytes.copy(out, at, from, cr)
    from = cr + 1 // the LF starts the next run
    cr = bytes.indexOf(CRLF, cr + 2)
  }
  at += bytes.copy(out, at, from)
  return out.subarray(0, at)
}

/** Inline text/plain or text/html, as mailparser's createNode classifies a non-multipart node. */
const inlineTextType = (node: MimeNode, root: boolean): "text/plain" | "text/html" | undefined => {
  const type = node.contentType || (root ? "text/plain" : false)
  if (type !== "text/plain" && type !== "text/html") return undefined
  if (node.disposition && node.disposition !== "inline") return undefined
  return type
}

/** `options`: the simpleParser options whose result it stands in for (their Iconv decodes encoded words). */
export const makeQuickParser = (options: SimpleParserOptions) => {
  const headerProcessor = new MailParser(options) as unknown as HeaderProcessor
  // This instance reads nothing but From fields (`headerFields`), of which only the addresses are
  // kept: the HTML and text renderings (escaping, quoting) were a fifth of its time, for nothing.
  headerProcessor.getAddressesHTML = () => ""
  headerProcessor.getAddressesText = () => ""
  const { libmime } = headerProcessor
  /**
   * libmime's decodeWords as MailParser calls it. A value without an encoded word (`=?`) it leaves
   * as it is, but for its own joining marker, which it removes wherever it is.
   */
  const decodeWords = (value: string) => {
    if (!value.includes("=?") && !value.includes(JOIN_MARK)) return value
    try {
      return libmime.decodeWords(value)
    } catch {
      return value
    }
  }
  // mailsplit's nodes are given mailparser's options, as its splitter gives them.
  const config = options as ConstructorParameters<typeof mailsplit.MimeNode>[1]

  const nodeOf = (buf: Buffer, from: number, to: number, parent: MimeNode | false): MimeNode => {
    const node = new mailsplit.MimeNode(parent, config)
    node.addHeaderChunk(buf.subarray(from, to))
    node.parseHeaders()
    return node
  }

  /** The offset after the root's header block, or -1 (no empty line, or too long). */
  const rootHeadEnd = (buf: Buffer): number => {
    let pos = 0
    while (pos < buf.length && pos <= HEAD_LIMIT) {
      const end = lineEnd(buf, pos)
      if (end === buf.length && buf[end - 1] !== LF) return -1
      if (isBlank(buf, pos, end)) return end
      pos = end
    }
    return -1
  }

  /** The parts of multipart/alternative `root` (its body from `start`), or undefined when irregular. */
  const alternatives = (buf: Buffer, start: number, root: MimeNode): Array<{ node: MimeNode; body: Buffer; from: number }> | undefined => {
    const boundary = root._boundary
    if (!boundary) return undefined
    const parts: Array<{ node: MimeNode; body: Buffer; from: number }> = []
    let state: "preamble" | "head" | "body" = "preamble"
    let headFrom = 0
    let node: MimeNode | undefined
    let bodyFrom = 0
    let pos = start
    while (pos < buf.length) {
      const end = lineEnd(buf, pos)
      if (end - pos > LINE_LIMIT) return undefined
      const line = buf.subarray(pos, end)
      const found = boundaryLine(line, boundary)
      if (state === "preamble") {
        // A closing delimiter before any part is one mailsplit skips; left to it.
        if (found === 2) return undefined
        if (found === 1) {
          state = "head"
          headFrom = end
        }
      } else if (state === "head") {
        if (found) return undefined
        if (end - headFrom > HEAD_LIMIT) return undefined
        if (isBlank(buf, pos, end)) {
          node = nodeOf(buf, headFrom, end, root)
          if (node.multipart || node.contentType === "message/rfc822") return undefined
          state = "body"
          bodyFrom = end
        }
      } else if (found) {
        // The line ending before a delimiter belongs to the delimiter. But mailsplit keeps a
        // body that is nothing but one line ending whole when the next part follows (its
        // splitter pushes the group's first line as it came when nothing is left after the trim).
        let bodyTo = pos
        if (bodyTo > bodyFrom && buf[bodyTo - 1] === LF) bodyTo--
        if (bodyTo > bodyFrom && buf[bodyTo - 1] === CR) bodyTo--
        if (bodyTo === bodyFrom && found === 1) bodyTo = pos
        parts.push({ node: node!, body: buf.subarray(bodyFrom, bodyTo), from: bodyFrom })
        if (found === 2) return parts // the rest is the epilogue
        state = "head"
        headFrom = end
      }
      pos = end
    }
    return undefined // no closing delimiter
  }

  /**
   * Whether a text part's content (`textOf`) is its body's own bytes: no transfer decoding changed
   * them (`textOf` decoded them as UTF-8 and made CR LF LF), no invalid UTF-8 became U+FFFD, and
   * no NUL is there for pgSafe to drop.
   */
  const asRead = (node: MimeNode, body: Buffer) => !TRANSFER_DECODED.has(node.encoding) && body.indexOf(0) < 0 && isUtf8(body)

  /**
   * The message parsed as simpleParser would, or undefined when it is not one of the shapes taken
   * here. `rangedTextUnread`: a text that a range names (`QuickMail.textRange`) is not made into a
   * string (the result has the range and no `text`); its reader takes the bytes. For a 2 KiB message
   * that string was ~5 KB of the event loop's allocations (decoded, line ends replaced, scanned
   * for NUL) that the database then made again from the raw MIME (bench/REPORT.md, MX ingest,
   * fortieth session).
   */
  const parse = (buf: Buffer, options?: QuickParseOptions): QuickMail | undefined => {
    const unread = options?.rangedTextUnread === true
    const headEnd = rootHeadEnd(buf)
    if (headEnd < 0) return undefined
    const root = nodeOf(buf, 0, headEnd, false)
    const headers = root.headers as unknown as { lines: Array<{ key: string; line: string }> }

    /**
     * The text/plain parts with content, in order: `bytesAreText` when the content is the body's
     * bytes as they are (`asRead`), `content` unset while those bytes may stand for it.
     */
    const plain: Array<{ node: MimeNode; body: Buffer; from: number; bytesAreText: boolean; content?: string }> = []
    const html: Array<string> = []
    /** Adds a text/plain part; false when mailparser would decode it otherwise. */
    const addPlain = (node: MimeNode, body: Buffer, from: number): boolean => {
      if (!decodedAsUtf8(node)) return false
      const bytesAreText = asRead(node, body)
      // Bytes read as they are have content exactly when there are bytes: the string can wait.
      if (unread && bytesAreText) {
        if (body.length > 0) plain.push({ node, body, from, bytesAreText })
        return true
      }
      const content = textOf(node, body)
      if (content === undefined) return false
      if (content) plain.push({ node, body, from, bytesAreText, content })
      return true
    }
    if (root.multipart) {
      if (root.contentType !== "multipart/alternative") return undefined
      const parts = alternatives(buf, headEnd, root)
      if (!parts) return undefined
      for (const { node, body, from } of parts) {
        const type = inlineTextType(node, false)
        if (!type) return undefined
        if (type === "text/plain") {
          if (!addPlain(node, body, from)) return undefined
          continue
        }
        const content = textOf(node, body)
        if (content === undefined) return undefined
        // In an alternative neither kind is derived from the other; empty parts add nothing.
        if (content) html.push(content)
      }
    } else {
      if (inlineTextType(root, true) !== "text/plain") return undefined
      if (!addPlain(root, buf.subarray(headEnd), headEnd)) return undefined
    }

    // The text is one part's bytes only while that part is the only text/plain with content.
    const only = plain.length === 1 ? plain[0]! : undefined
    const textRange: QuickMail["textRange"] = only?.bytesAreText ? [only.from, only.from + only.body.length] : undefined
    const text = textRange && unread ? [] : plain.map((p) => p.content ?? textOf(p.node, p.body)!)
    return {
      ...headerFields(headers.lines),
      ...(text.length > 0 ? { text: text.join("\n") } : {}),
      ...(html.length > 0 ? { html: html.join("<br/>\n") } : {}),
      ...(textRange ? { textRange } : {}),
    }
  }

  /**
   * What the result takes from the root's header lines, as MailParser's `processHeaders` gives it:
   * the first From field through it; Subject and Message-ID as it reads them (the unfolded value
   * as UTF-8, its encoded words decoded, the first non-empty value kept), without a Map of every
   * header and a `decodeWords` run of ASCII without encoded words.
   */
  const headerFields = (lines: Array<{ key: string; line: string }>): QuickMail => {
    let from: QuickMail["from"]
    let subject: string | undefined
    let messageId: string | undefined
    for (const { key, line } of lines) {
      if (!RESULT_HEADERS.has(key)) continue
      const value = Buffer.from(libmime.decodeHeader(line).value.trim(), "binary").toString()
      if (key === "from") from ??= plainFrom(value) ?? { value: (headerProcessor.processHeaders([{ key, line }]).get("from") as AddressObject).value }
      else if (key === "subject") subject ||= decodeWords(value) || undefined
      else messageId ||= headerProcessor.ensureMessageIDFormat(decodeWords(value)) || undefined
    }
    return { from, subject, messageId, headerLines: lines, attachments: [] }
  }

  /**
   * The root headers alone from the start of a message (`head`, at most HEAD_LIMIT bytes), read as
   * `parse` reads them: up to the blank line that ends them, else up to the last whole line. No
   * bodies. For mail mailparser gives up on (./mime.ts `unparsedMail`).
   */
  const headOnly = (head: Buffer): QuickMail => {
    const end = rootHeadEnd(head)
    const block = end >= 0 ? head.subarray(0, end) : head.subarray(0, head.lastIndexOf(LF) + 1 || head.length)
    const root = nodeOf(block, 0, block.length, false)
    return headerFields((root.headers as unknown as { lines: Array<{ key: string; line: string }> }).lines)
  }

  return Object.assign(parse, { headOnly })
}
