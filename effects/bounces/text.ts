/**
 * Bounces that are not RFC 3464 reports: plain-text notices such as Yahoo's "Failure Notice",
 * Exim's "Mail delivery failed" and delay warnings, and Gmail's older "Delivery to the following
 * recipient failed permanently". They share a shape: a sender like MAILER-DAEMON or a subject
 * like "Undelivered Mail", an explanation, the remote server's reply (`550 5.1.1 …`), then a copy
 * of the original message, which is cut off before anything is read so its text cannot be taken
 * for the reply.
 */

/** What a notice says about the recipient. */
export interface TextStatus {
  /** `failed` (permanent) or `delayed` (still being tried). */
  readonly action: "failed" | "delayed"
  /** The enhanced status code (`5.1.1`), when the reply carries one. */
  readonly status: string | null
  /** The basic reply code (`550`), when there is one. */
  readonly code: number | null
  /** The reply line (or the phrase that decided), at most 500 characters. */
  readonly diagnostic: string | null
}

const SENDER = /mailer-daemon|postmaster|mail delivery|mail administrator|mailer_daemon/i
const SUBJECT =
  /undeliver|undelivered|delivery status notification|delivery failure|delivery has failed|returned mail|failure notice|mail delivery failed|could not be delivered|delivery (?:notification|problem)|delayed|warning: could not send|non ?remis|unzustellbar/i

/** Where the copy of the original message starts (Yahoo, Exim, Gmail, Sendmail, qmail …). */
const ORIGINAL = /^\s*-{2,}.*(?:original message|copy of the message|below this line|message follows|undelivered message)/im

/** A reply with a basic and an enhanced code: `550 5.1.1 …`, `550-5.1.1 …`. */
const REPLY_WITH_STATUS = /(?<!\d)([45]\d\d)[ -]+([45]\.\d{1,3}\.\d{1,3})(?![\d.])[^\n]*/
/** A reply line that starts with its code: `554: delivery error …`, `550 No such user`. */
const REPLY_LINE = /^[ \t]*([45]\d\d)(?:[ :-][^\n]*)?$/m
/** An enhanced code on its own. */
const STATUS_ONLY = /(?<![\d.])([45]\.\d{1,3}\.\d{1,3})(?![\d.])[^\n]*/

const DELAYED = /\bdelayed\b|has not yet been delivered|not been delivered yet|will (?:keep|continue) trying|delivery attempts will continue|temporar(?:y|ily) (?:failure|error|problem)|\bwarning\b/i
const FAILED = /permanent(?:ly)? (?:error|failure|fatal)|failed permanently|could not be delivered|couldn't be delivered|undeliverable|unable to deliver|delivery (?:to the following recipients? )?failed|address(?:es)? failed|user unknown|no such user/i

const clip = (s: string) => s.replace(/\s+/g, " ").trim().slice(0, 500)

/**
 * Whether the headers say this is a delivery notice at all. The null sender alone does not:
 * autoresponders (RFC 3834) answer the return path with it too.
 */
export const looksLikeBounce = (h: { readonly from: string; readonly subject: string; readonly failedRecipients: boolean }) =>
  h.failedRecipients || SENDER.test(h.from) || SUBJECT.test(h.subject)

/**
 * Reads a notice's explanation (the body before the copy of the original). Null when it names
 * neither a reply code nor a failure or delay.
 */
export const readTextBounce = (body: string): TextStatus | null => {
  const text = body.replace(/\r\n?/g, "\n")
  const cut = ORIGINAL.exec(text)
  const explanation = cut ? text.slice(0, cut.index) : text
  const delayed = DELAYED.test(explanation)

  const full = REPLY_WITH_STATUS.exec(explanation)
  if (full) {
    const status = full[2]!
    return { action: status.startsWith("5") ? "failed" : "delayed", status, code: Number(full[1]), diagnostic: clip(full[0]) }
  }
  const line = REPLY_LINE.exec(explanation)
  if (line) {
    const code = Number(line[1])
    return { action: code >= 500 ? "failed" : "delayed", status: null, code, diagnostic: clip(line[0]) }
  }
  const status = STATUS_ONLY.exec(explanation)
  if (status) return { action: status[1]!.startsWith("5") ? "failed" : "delayed", status: status[1]!, code: null, diagnostic: clip(status[0]) }
  // No code at all: only the wording can tell.
  if (delayed) return { action: "delayed", status: null, code: null, diagnostic: clip(DELAYED.exec(explanation)![0]) }
  const failed = FAILED.exec(explanation)
  if (failed) return { action: "failed", status: null, code: null, diagnostic: clip(failed[0]) }
  return null
}
