/**
 * From a send request to what will be stored and dispatched: recipients parsed, counted and
 * de-duplicated, attachments decoded, extra headers checked, the template merged under the
 * inline fields (SPEC.md "From rules" 3) and placeholders rendered. Every problem of the request
 * is reported at once, each with its field path.
 */
import type { FieldIssue } from "../errors.ts"
import type { AttachmentInput } from "./attachments.ts"
import { normalizedEmail, parseRecipient } from "./recipients.ts"
import type { RecipientKind } from "./store.ts"
import { renderHtml, renderText, type Variables } from "../templates/render.ts"
import type { TemplateRow } from "../templates/schema.ts"
import { MAX_SUBJECT_CHARS } from "../shared/schema.ts"

/** A send request as the service takes it: the HTTP body, or an OutboundSender request. */
export interface OutboundRequest {
  readonly to?: ReadonlyArray<string> | null | undefined
  readonly cc?: ReadonlyArray<string> | null | undefined
  readonly bcc?: ReadonlyArray<string> | null | undefined
  readonly subject?: string | null | undefined
  readonly html_body?: string | null | undefined
  readonly text_body?: string | null | undefined
  readonly attachments?: ReadonlyArray<AttachmentInput> | null | undefined
  readonly template_id?: number | null | undefined
  readonly variables?: Readonly<Record<string, string>> | null | undefined
  readonly from_domain_id?: number | null | undefined
  readonly from_address?: string | null | undefined
  readonly headers?: Readonly<Record<string, string>> | null | undefined
}

export interface ParsedRecipient {
  readonly email: string
  readonly name?: string | undefined
  readonly kind: RecipientKind
}

export interface Content {
  readonly subject: string
  readonly html: string
  readonly text: string
  readonly headers: Readonly<Record<string, string>>
  readonly templateId: number | null
}

const issue = (field: string, message: string): FieldIssue => ({ field, code: "VALIDATION_ERROR", message })

/** Parses `to`, `cc`, `bcc`; duplicates (case-insensitive) keep their first place, to before cc before bcc. */
export const parseRecipients = (
  lists: ReadonlyArray<readonly [RecipientKind, ReadonlyArray<string>]>,
): { readonly recipients: ReadonlyArray<ParsedRecipient>; readonly issues: ReadonlyArray<FieldIssue> } => {
  const issues: Array<FieldIssue> = []
  const seen = new Set<string>()
  const recipients: Array<ParsedRecipient> = []
  for (const [kind, list] of lists) {
    list.forEach((raw, i) => {
      const parsed = parseRecipient(raw)
      if (!parsed) return void issues.push(issue(`${kind}.${i}`, "Expected an email address: addr@domain or Name <addr@domain>"))
      const key = normalizedEmail(parsed.email)
      if (seen.has(key)) return
      seen.add(key)
      recipients.push({ ...parsed, kind })
    })
  }
  return { recipients, issues }
}

// Headers the service writes itself, or that would change who gets the message.
const RESERVED_HEADERS = new Set([
  "from", "to", "cc", "bcc", "subject", "sender", "date", "message-id", "return-path", "received", "mime-version",
  "content-type", "content-transfer-encoding", "content-disposition", "dkim-signature",
])

export const headerIssues = (headers: Readonly<Record<string, string>>): ReadonlyArray<FieldIssue> =>
  Object.entries(headers).flatMap(([name, value]) => {
    if (!/^[A-Za-z0-9-]{1,76}$/.test(name)) return [issue(`headers.${name}`, "Expected a header name of letters, digits and -")]
    if (RESERVED_HEADERS.has(name.toLowerCase())) return [issue(`headers.${name}`, `${name} is set by the service`)]
    if (typeof value !== "string" || value.length > 998 || /[\u0000-\u001f\u007f]/.test(value)) {
      return [issue(`headers.${name}`, "Expected a single-line value of at most 998 characters")]
    }
    return []
  })

/**
 * The stored content: inline fields over the template's; placeholders rendered when a template
 * or variables were given (a plain send keeps a literal `{{` as written). Subject and at least
 * one body are required afterwards. A body rendered longer than `maxChars` (the request body
 * limit, MAX_BODY_BYTES: no longer than a body the request could have carried itself) or a
 * subject longer than a header line is refused with its field.
 */
export const mergeContent = (
  request: OutboundRequest,
  template: TemplateRow | undefined,
  maxChars: number,
): { readonly content: Content; readonly issues: ReadonlyArray<FieldIssue> } => {
  const variables: Variables = request.variables ?? {}
  const render = template !== undefined || request.variables != null
  const pick = (inline: string | null | undefined, fromTemplate: string | null | undefined) => inline ?? fromTemplate ?? ""
  const issues: Array<FieldIssue> = []
  const rendered = (field: string, s: string | undefined) => {
    if (s !== undefined) return s
    issues.push(issue(field, `${field} rendered with the variables would be longer than ${maxChars} characters`))
    return ""
  }
  const subject = pick(request.subject, template?.subject)
  const text = pick(request.text_body, template?.text_body)
  const html = pick(request.html_body, template?.html_body)
  const content: Content = {
    // A variable may not break the Subject header onto a second line.
    subject: rendered("subject", render ? renderText(subject, variables, maxChars) : subject).replace(/[\r\n]+/g, " ").trim(),
    text: rendered("text_body", render ? renderText(text, variables, maxChars) : text),
    html: rendered("html_body", render ? renderHtml(html, variables, maxChars) : html),
    headers: request.headers ?? {},
    templateId: template?.id ?? null,
  }
  if (issues.length > 0) return { content, issues }
  if (content.subject.length > MAX_SUBJECT_CHARS) {
    issues.push(issue("subject", `subject rendered with the variables is ${content.subject.length} characters; at most ${MAX_SUBJECT_CHARS}`))
  }
  if (content.subject === "") issues.push(issue("subject", "subject is required (in the request or its template)"))
  if (content.text.trim() === "" && content.html.trim() === "") {
    issues.push(issue("text_body", "html_body or text_body is required (in the request or its template)"))
  }
  return { content, issues }
}
