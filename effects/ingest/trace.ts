/**
 * The trace this MX writes on top of every stored message (RFC 5321 §4.4): the `Received:` line,
 * built only here so the transport work can say `ESMTPS` once STARTTLS is in (`tls`).
 */

export interface TraceInput {
  /** What the client said in EHLO/HELO (anything: it is reduced to host name characters). */
  readonly helo: string
  readonly ip: string
  /** This MX's host name. */
  readonly mta: string
  /** The id this MX gave the transaction (logs and the 250 reply can name it). */
  readonly id: string
  readonly at: Date
  /** Set when the session ran over TLS. */
  readonly tls?: { readonly protocol: string; readonly cipher: string } | null
}

/** `::ffff:1.2.3.4` → `1.2.3.4` (SPF compares plain IPv4). */
export const plainIp = (ip: string): string => ip.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, "$1")

/** A `Received:` header (CRLF-terminated); client-supplied names never inject anything. */
export const receivedHeader = (t: TraceInput): string => {
  const helo = t.helo.replace(/[^A-Za-z0-9.\-_:[\]]/g, "").slice(0, 255) || "unknown"
  const ip = plainIp(t.ip).replace(/[^0-9A-Fa-f.:]/g, "")
  const date = t.at.toUTCString().replace("GMT", "+0000")
  const protocol = t.tls ? "ESMTPS" : "ESMTP"
  return `Received: from ${helo} ([${ip}])\r\n\tby ${t.mta} with ${protocol} id ${t.id};\r\n\t${date}\r\n`
}

/**
 * Header text this MX writes itself (mailauth's verdicts quote names from the message, a DKIM
 * `d=` with a NUL among them): control characters other than the folding CR LF TAB go, so the
 * trace never carries bytes a header may not.
 */
export const traceSafe = (header: string): string => header.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, "")
