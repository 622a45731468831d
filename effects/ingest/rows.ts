/**
 * What the MX's inbound messages and the sandbox's captured messages store alike: the columns
 * taken from the parsed message (both build them here, so a parsed message is turned into
 * storable values, safe text and JSON, once), and the sandbox's attachment rows (the MX sends its
 * attachments' bytes apart from the row: ./prepare.ts).
 */
import type { AttachmentMeta } from "../messages/schema.ts"
import type { ParsedMessage } from "./mime.ts"
import { pgSafe } from "./text.ts"

/** The columns both message tables have, every value safe for its column. */
export interface MessageColumns {
  readonly envelope_from: string
  readonly from_addr: string
  readonly subject: string
  readonly text_body: string
  readonly html_body: string
  /** The header map (for a `jsonb` column). */
  readonly headers: unknown
  /** The attachment metadata (for a `jsonb` column). */
  readonly attachments: unknown
  readonly message_id: string | null
}

/** An attachment as the sandbox stores it; `content` is base64 (decoded by the server). */
export interface AttachmentRow extends AttachmentMeta {
  readonly position: number
  readonly content: string
}

export const attachmentMeta = (parsed: ParsedMessage): Array<AttachmentMeta> =>
  parsed.attachments.map((a) => ({ filename: a.filename, content_type: a.contentType, size: a.content.byteLength, content_id: a.contentId }))

/** `mailFrom` is the SMTP MAIL FROM ('' for bounces); From falls back to it. */
export const messageColumns = (parsed: ParsedMessage, mailFrom: string): MessageColumns => {
  const envelopeFrom = pgSafe(mailFrom)
  return {
    envelope_from: envelopeFrom,
    from_addr: parsed.from || envelopeFrom,
    subject: parsed.subject,
    text_body: parsed.text,
    html_body: parsed.html,
    // Already safe: parseMail made every header name and value, and every attachment's name and
    // type, `pgSafe` (walking them again was ~5 % of a 2 KiB message's preparing).
    headers: parsed.headers,
    attachments: attachmentMeta(parsed),
    message_id: parsed.messageId,
  }
}

export const attachmentRows = (parsed: ParsedMessage): Array<AttachmentRow> =>
  parsed.attachments.map((a, position) => ({
    position,
    filename: a.filename,
    content_type: a.contentType,
    content_id: a.contentId,
    size: a.content.byteLength,
    content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength).toString("base64"),
  }))
