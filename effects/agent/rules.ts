/**
 * When the agent must not answer, and what a thread is (DECISIONS.md "Retention, SMS, agent";
 * RFC 3834 "Recommendations for Automatic Responses to Electronic Mail"). Pure functions over a
 * stored message, so every rule is testable on real header fixtures without a database.
 */

/** What the rules look at: the stored columns of an inbound message. */
export interface RuleInput {
  readonly fromAddr: string
  readonly toAddr: string
  /** SMTP MAIL FROM; '' is the null reverse-path of bounces. */
  readonly envelopeFrom: string
  /** Lowercase header name → unfolded value(s), as ingest stores them. */
  readonly headers: Readonly<Record<string, unknown>>
}

/** The header's values as strings (repeated headers are arrays in the stored map). */
export const headerValues = (headers: Readonly<Record<string, unknown>>, name: string): Array<string> => {
  const v = Object.hasOwn(headers, name) ? headers[name] : undefined
  if (v === undefined || v === null) return []
  return (Array.isArray(v) ? v : [v]).map((x) => String(x).trim())
}

export const headerValue = (headers: Readonly<Record<string, unknown>>, name: string): string | undefined => headerValues(headers, name)[0]

const ADDRESS = /[^\s<>(),;:"@]+@[A-Za-z0-9.-]+\.[A-Za-z0-9-]+/

/** The first mailbox address in a header value (`"Name" <a@b>`, `a@b (Name)`, `a@b`), lowercased. */
export const addressOf = (value: string | undefined): string | undefined => {
  if (!value) return undefined
  const angled = /<([^<>]*)>/.exec(value)?.[1]
  const found = ADDRESS.exec(angled !== undefined && angled.includes("@") ? angled : value)?.[0]
  return found?.toLowerCase()
}

const localPart = (address: string | undefined): string => address?.slice(0, address.lastIndexOf("@")).toLowerCase() ?? ""

const PRECEDENCE_SKIPPED = new Set(["bulk", "list", "junk", "auto_reply"])

/**
 * Why this message gets no reply, or undefined when it may get one. The first rule that matches
 * wins; the reason is recorded on the job as shown to the account.
 */
export const skipReason = (m: RuleInput): string | undefined => {
  const h = m.headers
  const sender = addressOf(m.fromAddr)
  const returnPath = headerValue(h, "return-path")
  if (m.envelopeFrom.trim() === "" || returnPath?.replace(/\s/g, "") === "<>") return "null sender (a bounce or notification)"
  if (!sender) return "no sender address to reply to"
  if (localPart(sender) === "mailer-daemon" || localPart(addressOf(m.envelopeFrom)) === "mailer-daemon") return "MAILER-DAEMON sender"
  const autoSubmitted = headerValue(h, "auto-submitted")
  if (autoSubmitted !== undefined) {
    const kind = autoSubmitted.split(/[;(\s]/)[0]!.toLowerCase()
    if (kind !== "no") return `Auto-Submitted: ${kind || "(empty)"}`
  }
  const precedence = headerValue(h, "precedence")?.toLowerCase()
  if (precedence !== undefined && PRECEDENCE_SKIPPED.has(precedence)) return `Precedence: ${precedence}`
  if (headerValue(h, "list-id") !== undefined) return "mailing list (List-Id)"
  if (headerValue(h, "list-unsubscribe") !== undefined) return "bulk sender (List-Unsubscribe)"
  if (headerValue(h, "x-auto-response-suppress") !== undefined) return "the sender asked for no automatic replies (X-Auto-Response-Suppress)"
  if (/^\s*multipart\/report\b/i.test(headerValue(h, "content-type") ?? "")) return "delivery or read report (multipart/report)"
  // Other auto-responders' own markers (vacation programs that predate RFC 3834).
  if (headerValue(h, "x-autoreply") !== undefined || headerValue(h, "x-autorespond") !== undefined) return "auto-responder (X-Autoreply)"
  if (sender === addressOf(m.toAddr)) return "sent from this address itself"
  return undefined
}

const REPLY_PREFIX = /^\s*(?:(?:re|fwd?|aw)(?:\s*\[\d+\])?\s*:\s*)+/i

/** The subject without Re:/Fwd:/Fw:/AW: prefixes, spaces collapsed, lowercased: the thread's name. */
export const threadKey = (subject: string): string => subject.replace(REPLY_PREFIX, "").replace(/\s+/g, " ").trim().toLowerCase()

/** `Re: <subject>`, without stacking prefixes on a subject that already has one. */
export const replySubject = (subject: string): string => {
  const trimmed = subject.trim()
  if (trimmed === "") return "Re: (no subject)"
  return /^re\s*:/i.test(trimmed) ? trimmed : `Re: ${trimmed}`
}

/** Longest header value outbound accepts (one line of RFC 5322). */
const MAX_HEADER_CHARS = 998

/** Message-ID tokens (`<id@host>`) of a header value. */
const msgIds = (value: string | undefined): Array<string> => value?.match(/<[^<>\s]+>/g) ?? []

/**
 * The reply's threading headers (RFC 5322 3.6.4): In-Reply-To the message's Message-ID, and
 * References its References (or In-Reply-To) plus that id. Nothing when it had no Message-ID.
 */
export const threadingHeaders = (headers: Readonly<Record<string, unknown>>, messageId: string | null): Record<string, string> => {
  const own = msgIds(headerValue(headers, "message-id"))[0] ?? msgIds(messageId ?? undefined)[0] ??
    (messageId && /^[^<>\s]+@[^<>\s]+$/.test(messageId) ? `<${messageId}>` : undefined)
  if (!own) return {}
  const earlier = msgIds(headerValue(headers, "references"))
  const parents = earlier.length > 0 ? earlier : msgIds(headerValue(headers, "in-reply-to")).slice(0, 1)
  if (own.length > MAX_HEADER_CHARS) return {}
  // Keep the chain within one header line: the first id and the most recent ones (RFC 5322 allows trimming).
  const kept = [...parents.filter((id) => id !== own), own]
  while (kept.length > 1 && kept.join(" ").length > MAX_HEADER_CHARS) kept.splice(kept.length > 2 ? 1 : 0, 1)
  return { "In-Reply-To": own, References: kept.join(" ") }
}

/** Where the reply goes: a Reply-To address when there is one, else the sender. */
export const replyTo = (m: RuleInput): string | undefined => addressOf(headerValue(m.headers, "reply-to")) ?? addressOf(m.fromAddr)
