/**
 * MIME → the fields an InboundMessage stores, with mailparser: decoded subject and bodies in any
 * charset, attachments and inline parts as bytes, and the header block as a plain map. Strings
 * are made safe for PostgreSQL (no NUL, no lone surrogates): real mail carries both.
 */
import { Effect, Schema } from "effect"
import { type AddressObject, type EmailAddress, simpleParser, type SimpleParserOptions } from "mailparser"
import { inMemory, isMessageBytes, type MessageBytes } from "./bytes.ts"
import { CharsetDecoder } from "./charsets.ts"
import { pgSafe } from "./text.ts"

export { pgSafe }

/** mailparser gave up on the message: 554 5.6.0. */
export class MalformedMessage extends Schema.TaggedError<MalformedMessage>()("MalformedMessage", {
  message: Schema.String,
}) {}

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
  /** Lowercase header name → unfolded raw value; repeated headers (Received) become arrays. */
  readonly headers: Record<string, string | Array<string>>
  readonly attachments: ReadonlyArray<ParsedAttachment>
}

/** `Name <addr>`, quoting the name only when it holds specials (mailparser quotes every name). */
const mailbox = (m: EmailAddress): string => {
  if (m.group) return `${m.name}: ${m.group.map(mailbox).join(", ")};`
  const name = m.name.trim()
  if (!name) return m.address ?? ""
  const shown = /[()<>[\]:;@\\,."]/.test(name) ? `"${name.replace(/(["\\])/g, "\\$1")}"` : name
  return m.address ? `${shown} <${m.address}>` : shown
}

const addressText = (a: AddressObject | Array<AddressObject> | undefined): string =>
  a === undefined ? "" : (Array.isArray(a) ? a : [a]).flatMap((x) => x.value).map(mailbox).join(", ")

const headerMap = (lines: ReadonlyArray<{ key: string; line: string }>): Record<string, string | Array<string>> => {
  // A Map, then own properties: a header named `__proto__` must stay a header.
  const out = new Map<string, string | Array<string>>()
  for (const { key, line } of lines) {
    const name = pgSafe(key.toLowerCase())
    const colon = line.indexOf(":")
    const value = pgSafe((colon >= 0 ? line.slice(colon + 1) : "").replace(/\r?\n[ \t]+/g, " ").trim())
    const seen = out.get(name)
    if (seen === undefined) out.set(name, value)
    else if (Array.isArray(seen)) seen.push(value)
    else out.set(name, [seen, value])
  }
  return Object.fromEntries(out)
}

/** Parses the message, `prefix` (the trace header) first, streaming from wherever the bytes are. */
export const parseMessage = (raw: Uint8Array | MessageBytes, prefix?: Uint8Array) =>
  Effect.tryPromise({
    try: () =>
      simpleParser((isMessageBytes(raw) ? raw : inMemory(raw)).stream(prefix), {
        // Keep cid: links so inline images stay attachments instead of data: URLs in the HTML.
        keepCidLinks: true,
        skipTextToHtml: true,
        skipImageLinks: true,
        maxHtmlLengthToParse: 4 * 1024 * 1024,
        Iconv: CharsetDecoder as unknown as SimpleParserOptions["Iconv"],
      }),
    catch: (e) => new MalformedMessage({ message: e instanceof Error ? e.message : String(e) }),
  }).pipe(
    Effect.map((mail): ParsedMessage => ({
      from: pgSafe(addressText(mail.from)),
      subject: pgSafe(mail.subject ?? ""),
      text: pgSafe(mail.text ?? ""),
      html: pgSafe(typeof mail.html === "string" ? mail.html : ""),
      messageId: mail.messageId ? pgSafe(mail.messageId) : null,
      headers: headerMap(mail.headerLines),
      attachments: mail.attachments.map((a) => ({
        filename: pgSafe(a.filename ?? ""),
        contentType: pgSafe(a.contentType || "application/octet-stream"),
        contentId: a.cid ? pgSafe(a.cid) : a.contentId ? pgSafe(a.contentId.replace(/^<|>$/g, "")) : null,
        content: a.content,
      })),
    })),
    Effect.withSpan("Ingest.parse"),
  )
