/**
 * MIME → the fields an InboundMessage stores, with mailparser: decoded subject and bodies in any
 * charset, attachments and inline parts as bytes, and the header block as a plain map. Strings
 * are made safe for PostgreSQL (no NUL, no lone surrogates): real mail carries both.
 *
 * Plain functions, no Effect: the prepare worker threads (src/ingest/prepare-worker.ts) load this
 * module, and importing `effect` there cost ~32 MiB of resident memory per thread (measured:
 * bench/REPORT.md, MX ingest). ./parse.ts wraps it for the Effect side.
 */
import { type AddressObject, type EmailAddress, type ParsedMail, simpleParser, type SimpleParserOptions } from "mailparser"
import type { Readable } from "node:stream"
import { CharsetDecoder } from "./charsets.ts"
import { HEAD_LIMIT, makeQuickParser, type QuickMail, type QuickParseOptions } from "./mime-quick.ts"
import { pgSafe } from "./text.ts"

export interface ParsedAttachment {
  readonly filename: string
  readonly contentType: string
  readonly contentId: string | null
  readonly content: Uint8Array
}

export interface ParsedMessage {
  readonly from: string
  readonly subject: string
  readonly text: string
  readonly html: string
  readonly messageId: string | null
  /** Lowercase header name → unfolded raw value (both `pgSafe`); repeated headers (Received) become arrays. */
  readonly headers: Record<string, string | Array<string>>
  readonly attachments: ReadonlyArray<ParsedAttachment>
  /**
   * Where `text` is in the parsed bytes, when it is those bytes as they are (./mime-quick.ts
   * `QuickMail`). With `rangedTextUnread`, `text` is then '' and these bytes are the text.
   */
  readonly textRange?: readonly [start: number, end: number]
}

/** With `rangedTextUnread`, a text that `textRange` names is '' (the caller reads the range). */
export type ParseOptions = QuickParseOptions

/** `Name <addr>`, quoting the name only when it holds specials (mailparser quotes every name). */
const mailbox = (m: EmailAddress): string => {
  if (m.group) return `${m.name}: ${m.group.map(mailbox).join(", ")};`
  const name = m.name.trim()
  if (!name) return m.address ?? ""
  const shown = /[()<>[\]:;@\\,."]/.test(name) ? `"${name.replace(/(["\\])/g, "\\$1")}"` : name
  return m.address ? `${shown} <${m.address}>` : shown
}

const addressText = (a: Pick<AddressObject, "value"> | Array<AddressObject> | undefined): string =>
  a === undefined ? "" : (Array.isArray(a) ? a : [a]).flatMap((x) => x.value).map(mailbox).join(", ")

const headerMap = (lines: ReadonlyArray<{ key: string; line: string }>): Record<string, string | Array<string>> => {
  // A Map, then own properties: a header named `__proto__` must stay a header.
  const out = new Map<string, string | Array<string>>()
  for (const { key, line } of lines) {
    const name = pgSafe(key.toLowerCase())
    const colon = line.indexOf(":")
    const raw = colon >= 0 ? line.slice(colon + 1) : ""
    // Unfolded only when folded (most header lines are one line: no regular expression run on them).
    const value = pgSafe((raw.includes("\n") ? raw.replace(/\r?\n[ \t]+/g, " ") : raw).trim())
    const seen = out.get(name)
    if (seen === undefined) out.set(name, value)
    else if (Array.isArray(seen)) seen.push(value)
    else out.set(name, [seen, value])
  }
  return Object.fromEntries(out)
}

/**
 * The header lines of a header block we wrote ourselves (the trace: Authentication-Results,
 * Received-SPF, Received), in mailparser's `headerLines` shape: one entry per header, folded
 * continuation lines kept in `line`.
 */
export const headerLinesOf = (block: string): Array<{ key: string; line: string }> =>
  block.split(/\r?\n(?![ \t])/).filter((line) => line.trim() !== "").map((line) => ({
    key: line.slice(0, Math.max(0, line.indexOf(":"))).trim().toLowerCase(),
    line,
  }))

export const PARSER_OPTIONS = {
  // Keep cid: links so inline images stay attachments instead of data: URLs in the HTML.
  keepCidLinks: true,
  skipTextToHtml: true,
  skipImageLinks: true,
  maxHtmlLengthToParse: 4 * 1024 * 1024,
  Iconv: CharsetDecoder as unknown as SimpleParserOptions["Iconv"],
} as SimpleParserOptions

/** The common shapes of mail in one synchronous pass (./mime-quick.ts), the same result as mailparser's. */
const quickParser = makeQuickParser(PARSER_OPTIONS)

/** The quick parse, or undefined; a throw there (hostile input it did not foresee) leaves the message to mailparser, which decides. */
export const quickParse = (source: Buffer, options?: ParseOptions): QuickMail | undefined => {
  try {
    return quickParser(source, options)
  } catch {
    return undefined
  }
}

/** The first `max` bytes of a source; a stream is read no further and closed. */
const firstBytes = async (source: Buffer | Readable, max: number): Promise<Buffer> => {
  if (Buffer.isBuffer(source)) return source.subarray(0, max)
  const chunks: Array<Buffer> = []
  let length = 0
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      chunks.push(chunk)
      length += chunk.length
      if (length >= max) break
    }
  } finally {
    source.destroy()
  }
  return Buffer.concat(chunks).subarray(0, max)
}

/**
 * Mail mailparser gave up on (mailsplit's limits: over 1,000 MIME parts, a header block over
 * 1 MiB; or input nothing foresaw): its root headers alone (those within the first HEAD_LIMIT
 * bytes), no bodies or attachments. It is still
 * stored and charged, because mail is never refused for its content (DECISIONS.md "Hostile
 * input"): a 5xx would bounce a customer's mail, a 4xx have it retried for days. Its raw MIME
 * keeps every byte, for whoever wants to read it their own way.
 */
const unparsedMail = async (source: Buffer | Readable): Promise<QuickMail> => {
  // HEAD_LIMIT is far more than From, Subject and Message-ID take in real mail; the raw MIME keeps the rest.
  const head = await firstBytes(source, HEAD_LIMIT)
  try {
    return quickParser.headOnly(head)
  } catch {
    return { headerLines: [], attachments: [] }
  }
}

/**
 * Parses a message (a buffer parses faster than a stream of it, and the common shapes of mail in
 * a buffer skip mailparser's streams altogether; a spooled message comes as a function that opens
 * a stream of it, called again for the fallback). `prefix`: header lines that go in front of the
 * message's own in the header map (the trace this MX wrote), so the body is never copied to put
 * them in front of it. Mail mailparser cannot read gives its headers alone (`unparsedMail`);
 * rejects only when the bytes cannot be read.
 */
export const parseMail = async (
  source: Buffer | (() => Readable),
  prefix: ReadonlyArray<{ key: string; line: string }> = [],
  options?: ParseOptions,
): Promise<ParsedMessage> => {
  const open = () => (Buffer.isBuffer(source) ? source : source())
  let mail: QuickMail | ParsedMail | undefined = Buffer.isBuffer(source) ? quickParse(source, options) : undefined
  if (!mail) {
    const input = open()
    try {
      mail = await simpleParser(input, PARSER_OPTIONS)
    } catch {
      if (!Buffer.isBuffer(input)) input.destroy()
      mail = await unparsedMail(open())
    }
  }
  return {
    from: pgSafe(addressText(mail.from)),
    subject: pgSafe(mail.subject ?? ""),
    text: pgSafe(mail.text ?? ""),
    html: pgSafe(typeof mail.html === "string" ? mail.html : ""),
    messageId: mail.messageId ? pgSafe(mail.messageId) : null,
    headers: headerMap(prefix.length > 0 ? [...prefix, ...mail.headerLines] : mail.headerLines),
    attachments: mail.attachments.map((a) => ({
      filename: pgSafe(a.filename ?? ""),
      contentType: pgSafe(a.contentType || "application/octet-stream"),
      contentId: a.cid ? pgSafe(a.cid) : a.contentId ? pgSafe(a.contentId.replace(/^<|>$/g, "")) : null,
      content: a.content,
    })),
    ...("textRange" in mail && mail.textRange ? { textRange: mail.textRange } : {}),
  }
}

