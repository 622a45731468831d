/**
 * The outbound SMTP relay of the crash trials (SMTP_RELAY_URL): a real smtp-server in the test
 * process, so it outlives every kill of the service and remembers what it accepted. Rules, fixed
 * so the load can choose outcomes: a recipient whose local part starts with `reject` is refused
 * at RCPT with 550 (refunded and suppressed by the service), a message whose Subject contains
 * `[relay-451]` is refused after DATA with 451 (the provider failing as a whole: 502, refunded).
 * Platform mail (verification links) goes through it too.
 */
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import type { Rng } from "./rng.ts"

export interface RelayedMessage {
  /** Message-ID header without brackets, lowercase. */
  readonly messageId: string
  readonly subject: string
  /** Envelope recipients the relay accepted, lowercase. */
  readonly rcpts: ReadonlyArray<string>
  readonly text: string
}

export interface CrashRelay {
  readonly url: string
  readonly accepted: Array<RelayedMessage>
  /** Message-ID → recipient → how many times the relay took it. */
  readonly copies: () => Map<string, Map<string, number>>
  /** The newest `verify-email?token=` sent to `to`. */
  readonly verificationToken: (to: string) => string | undefined
  readonly close: () => Promise<void>
}

export const REFUSED_AT_DATA = "[relay-451]"

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code })

const header = (head: string, name: string): string => {
  const m = new RegExp(`^${name}:[ \\t]*(.*(?:\\r?\\n[ \\t].*)*)`, "im").exec(head)
  return m ? m[1]!.replace(/\r?\n[ \t]+/g, " ").trim() : ""
}

/** `latencyMs`: the relay takes up to this long to answer the end of DATA (kills land mid-dispatch). */
export const startCrashRelay = async (rng: Rng, latencyMs: number): Promise<CrashRelay> => {
  const accepted: Array<RelayedMessage> = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    size: 30 * 1024 * 1024,
    onRcptTo(address, _session, callback) {
      if (address.address.toLowerCase().startsWith("reject")) return callback(smtpError(550, "5.1.1 no such user here"))
      callback()
    },
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8")
        const at = raw.search(/\r?\n\r?\n/)
        const head = at >= 0 ? raw.slice(0, at) : raw
        const subject = header(head, "Subject")
        setTimeout(() => {
          if (subject.includes(REFUSED_AT_DATA)) return callback(smtpError(451, "4.3.0 relay is having a moment"))
          // Recorded before the 250 leaves: whatever the service records as sent, the relay has.
          accepted.push({
            messageId: header(head, "Message-ID").replace(/^<|>$/g, "").toLowerCase(),
            subject,
            rcpts: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
            text: at >= 0 ? raw.slice(at) : "",
          })
          callback()
        }, rng.int(latencyMs + 1))
      })
    },
  })
  // A killed service leaves its pooled connections reset: an expected event here, not an error.
  server.on("error", () => undefined)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.server.address() as AddressInfo).port
  return {
    url: `smtp://127.0.0.1:${port}`,
    accepted,
    copies: () => {
      const out = new Map<string, Map<string, number>>()
      for (const m of accepted) {
        const per = out.get(m.messageId) ?? new Map<string, number>()
        for (const r of m.rcpts) per.set(r, (per.get(r) ?? 0) + 1)
        out.set(m.messageId, per)
      }
      return out
    },
    verificationToken: (to) => {
      const mail = accepted.findLast((m) => m.rcpts.includes(to.toLowerCase()) && /verify-email\?token=/.test(m.text))
      // Quoted-printable may wrap the link (`=\r\n`) or encode `=` as `=3D`.
      const text = mail?.text.replace(/=\r?\n/g, "").replace(/=3D/gi, "=")
      const token = text && /verify-email\?token=([A-Za-z0-9._~%-]+)/.exec(text)?.[1]
      return token ? decodeURIComponent(token) : undefined
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
