/**
 * The text of an SMS notification: sender, subject and the start of the body in at most 160
 * characters (one SMS). Sender and subject are capped so a long one cannot crowd out the rest.
 */

export const SMS_MAX_CHARS = 160

const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim()

/** Cuts to `max` characters (code points, so no emoji is split), marking the cut with "…". */
export const clip = (s: string, max: number): string => {
  const chars = Array.from(s)
  return chars.length <= max ? s : chars.slice(0, max - 1).join("").trimEnd() + "…"
}

/** `From alice@example.com: Invoice 42 | Hello, please find …` */
export const smsSummary = (message: { readonly fromAddr: string; readonly subject: string; readonly textBody: string }): string => {
  const from = clip(oneLine(message.fromAddr) || "unknown sender", 50)
  const subject = clip(oneLine(message.subject) || "(no subject)", 60)
  const body = oneLine(message.textBody)
  return clip(`From ${from}: ${subject}${body ? ` | ${body}` : ""}`, SMS_MAX_CHARS)
}
