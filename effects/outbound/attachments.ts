/**
 * Attachment checks (SPEC.md "From rules" 4): at most 10, each at most 10 MiB decoded and 20 MiB
 * together, content in strict base64, `size` (when given) equal to the decoded size. Every
 * problem is reported with its path (`attachments.2.data_base64`).
 */
import type { FieldIssue } from "../errors.ts"
import type { MailAttachment } from "../ports/OutboundMailer.ts"

export const MAX_ATTACHMENTS = 10
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024
export const MAX_ATTACHMENTS_TOTAL_BYTES = 20 * 1024 * 1024

export interface AttachmentInput {
  readonly filename: string
  readonly content_type: string
  readonly size?: number | null | undefined
  readonly data_base64: string
}

// A flat pattern plus a length check: a grouped `(?:....)*` overflows the regex stack on megabytes.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** Standard base64 (padding required); line breaks (MIME style) are ignored. */
export const isBase64 = (text: string): boolean => {
  const b64 = text.replace(/[\r\n]/g, "")
  return b64.length % 4 === 0 && BASE64.test(b64)
}

/** Decoded size of well-formed base64, without decoding it. */
const decodedLength = (b64: string) => (b64.length / 4) * 3 - (b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0)

const issue = (field: string, message: string): FieldIssue => ({ field, code: "VALIDATION_ERROR", message })

/** The decoded attachments, or every issue found. Line breaks inside the base64 are allowed (MIME style). */
export const decodeAttachments = (
  inputs: ReadonlyArray<AttachmentInput>,
): { readonly attachments: ReadonlyArray<MailAttachment>; readonly issues: ReadonlyArray<FieldIssue> } => {
  const issues: Array<FieldIssue> = []
  if (inputs.length > MAX_ATTACHMENTS) {
    return { attachments: [], issues: [issue("attachments", `at most ${MAX_ATTACHMENTS} attachments per message`)] }
  }
  const attachments: Array<MailAttachment> = []
  let total = 0
  inputs.forEach((a, i) => {
    const at = `attachments.${i}`
    const b64 = a.data_base64.replace(/[\r\n]/g, "")
    if (!isBase64(b64)) return void issues.push(issue(`${at}.data_base64`, "Expected standard base64 content"))
    const size = decodedLength(b64)
    if (size > MAX_ATTACHMENT_BYTES) return void issues.push(issue(`${at}.data_base64`, "an attachment may be at most 10 MiB"))
    if (a.size != null && a.size !== size) {
      return void issues.push(issue(`${at}.size`, `size is ${a.size} but data_base64 decodes to ${size} bytes`))
    }
    total += size
    attachments.push({ filename: a.filename, contentType: a.content_type, content: new Uint8Array(Buffer.from(b64, "base64")) })
  })
  if (issues.length === 0 && total > MAX_ATTACHMENTS_TOTAL_BYTES) issues.push(issue("attachments", "attachments may be at most 20 MiB together"))
  return { attachments: issues.length ? [] : attachments, issues }
}
