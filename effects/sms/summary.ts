/**
 * The text of an SMS notification: sender, subject and the start of the body in at most 160
 * characters (one SMS). Sender and subject are capped so a long one cannot crowd out the rest.
 */
import { rangedText } from "../shared/ranged-text.ts"

export const SMS_MAX_CHARS = 160

const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim()

/** Cuts to `max` characters (code points, so no emoji is split), marking the cut with "…". */
export const clip = (s: string, max: number): string => {
  const chars = Array.from(s)
  return chars.length <= max ? s : chars.slice(0, max - 1).join("").trimEnd() + "…"
}

/** UTF-16 units of a body looked at first: a few times what one SMS can show. */
const HEAD = 4 * SMS_MAX_CHARS

/**
 * `From alice@example.com: Invoice 42 | Hello, please find …`
 *
 * Made on the event loop, inside the storing commit, for each message to an address with an SMS
 * rule (./delivery.ts), so a long body is not flattened whole (100 KiB of text was ~100,000
 * one-character strings): when its first HEAD units alone, made one line, overflow the SMS by
 * more than their last character, the text is the same as from the whole body (one line of a
 * prefix is a prefix of one line of the whole, but for that last character: a whitespace run or
 * a surrogate pair the cut went through). test/sms/summary.test.ts holds the two equal.
 * `smsBody` is the text body, or as much of it as `smsBodyOf` keeps: the summary is the same.
 */
export const smsSummary = (message: { readonly fromAddr: string; readonly subject: string; readonly smsBody: string }): string => {
  const from = clip(oneLine(message.fromAddr) || "unknown sender", 50)
  const subject = clip(oneLine(message.subject) || "(no subject)", 60)
  const body = decidingHead(message.smsBody) ?? oneLine(message.smsBody)
  return clip(`From ${from}: ${subject}${body ? ` | ${body}` : ""}`, SMS_MAX_CHARS)
}

/** The body's first HEAD units made one line, when they alone overflow the SMS by more than their last character. */
const decidingHead = (text: string): string | undefined => {
  if (text.length <= HEAD) return undefined
  const head = oneLine(text.slice(0, HEAD))
  // Code points are at least half the UTF-16 units: most heads need no count (ingest asks for every message).
  return head.length > 2 * (SMS_MAX_CHARS + 1) || Array.from(head).length > SMS_MAX_CHARS + 1 ? head : undefined
}

/**
 * As much of a text body as `smsSummary` reads, in a string of its own: the first HEAD units
 * when they decide the summary, else the whole body; the summary is the same from either.
 * Ingest hands this to the commit's subscribers instead of the body: a 100 KiB body held from
 * parsing until its batch committed outlived two scavenges, so each was promoted to the old
 * generation and left there for a full GC (bench/REPORT.md, MX ingest, 2026-11-27 sixth session).
 */
export const smsBodyOf = (text: string): string =>
  // A short body is kept whole: cutting it cost more than holding it (most mail, every message).
  text.length <= KEPT_WHOLE || decidingHead(text) === undefined
    ? text
    // Copied through bytes: V8's `slice` would be a view that keeps the whole body alive.
    : Buffer.from(text.slice(0, HEAD), "utf16le").toString("utf16le")

/**
 * `smsBodyOf` of the text that `bytes` stand for (UTF-8 without NUL read with every CR LF made
 * LF: a message's text range, effects/ingest/mime-quick.ts `QuickMail`), reading only their first
 * few KB when those decide the summary, as they do for all but bodies that start with a long run
 * of blanks: ingest then never makes a large text into a string it would not store. A cut goes
 * through at most one character or CR LF, so of the text made from the first bytes only the last
 * unit or two can differ from the whole's. test/sms/summary.test.ts holds the summaries equal.
 */
export const smsBodyOfBytes = (bytes: Uint8Array): string => {
  // Each UTF-16 unit takes at most 3 bytes (a 4-byte sequence makes two).
  const cut = 3 * HEAD + 8
  if (bytes.byteLength > cut) {
    const head = rangedText(bytes.subarray(0, cut))
    if (head.length > HEAD + 2 && decidingHead(head) !== undefined) return Buffer.from(head.slice(0, HEAD), "utf16le").toString("utf16le")
  }
  return smsBodyOf(rangedText(bytes))
}

/** UTF-16 units of a body `smsBodyOf` keeps whole without looking (8 KiB). */
const KEPT_WHOLE = 4096
