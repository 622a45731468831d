/**
 * What both outbound adapters share: the nodemailer message built from a dispatch (the relay
 * sends it, the capture transport keeps it, so a capture is byte for byte what the relay would
 * have sent, DKIM signature included), and the reading of the relay's answer per recipient.
 */
import { type Duration, Effect, Option } from "effect"
import type { NodemailerError, SendMailOptions } from "nodemailer"
import { ProviderError } from "../../effects/errors.ts"
import type { DispatchResult, MailAddress, OutboundDispatch, RecipientVerdict } from "../../effects/ports/OutboundMailer.ts"
import { RELAY_DEADLINE, sendWithin } from "./platform-mailer.ts"

const address = (a: MailAddress) => (a.name ? { name: a.name, address: a.email } : a.email)

export const mailOptions = (d: OutboundDispatch): SendMailOptions => ({
  from: d.from,
  ...(d.to.length ? { to: d.to.map(address) } : {}),
  ...(d.cc.length ? { cc: d.cc.map(address) } : {}),
  subject: d.subject,
  ...(d.text ? { text: d.text } : {}),
  ...(d.html ? { html: d.html } : {}),
  attachments: d.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: Buffer.from(a.content) })),
  headers: { ...d.headers },
  messageId: `<${d.messageIdHeader}>`,
  // The envelope is explicit: Bcc recipients are in it and in no header; suppressed ones in neither.
  envelope: { from: d.from, to: [...d.envelope] },
  ...(Option.isSome(d.dkim) ? { dkim: { ...d.dkim.value } } : {}),
})

/** The reply code at the start of an SMTP reply (`250 2.0.0 Ok` → 250). */
export const replyCode = (response: unknown): number | null => {
  const m = /^(\d{3})\b/.exec(String(response ?? ""))
  return m ? Number(m[1]) : null
}

const stripBrackets = (id: string) => id.replace(/^<|>$/g, "")

interface SmtpInfo {
  readonly accepted?: ReadonlyArray<unknown>
  readonly rejectedErrors?: ReadonlyArray<NodemailerError>
  readonly response?: unknown
  readonly messageId?: string
  readonly serverMessageId?: string
}

/** One verdict per envelope recipient, from the relay's accepted list and per-recipient errors. */
const verdicts = (d: OutboundDispatch, accepted: ReadonlyArray<unknown>, rejected: ReadonlyArray<NodemailerError>, okCode: number | null) => {
  const acceptedSet = new Set(accepted.map((a) => String(typeof a === "object" && a && "address" in a ? a.address : a).toLowerCase()))
  const refused = new Map(rejected.map((e) => [String(e.recipient ?? "").toLowerCase(), e]))
  return d.envelope.map((email): RecipientVerdict => {
    const key = email.toLowerCase()
    const err = refused.get(key)
    if (err) return { email, accepted: false, code: err.responseCode ?? replyCode(err.response) }
    if (acceptedSet.has(key)) return { email, accepted: true, code: okCode }
    // Not named either way (should not happen): not proven delivered, so not charged.
    return { email, accepted: false, code: null }
  })
}

/** Sends with `transport` and reads the answer; only a failure of the whole message is an error. */
export const sendAndRead = (
  transport: { sendMail: (o: SendMailOptions) => Promise<SmtpInfo> },
  d: OutboundDispatch,
  deadline: Duration.Input = RELAY_DEADLINE,
): Effect.Effect<DispatchResult, ProviderError> =>
  sendWithin(transport, mailOptions(d), deadline, (e) => e as NodemailerError).pipe(
    Effect.map((info) => info as SmtpInfo),
    Effect.map((info): DispatchResult => ({
      providerMessageId: stripBrackets(info.serverMessageId ?? info.messageId ?? d.messageIdHeader),
      recipients: verdicts(d, info.accepted ?? [], info.rejectedErrors ?? [], replyCode(info.response)),
    })),
    Effect.catch((err: NodemailerError) => {
      // Every recipient refused at RCPT TO: an answer about the recipients, not a provider failure.
      if (err.code === "EENVELOPE" && err.command === "RCPT TO" && err.rejectedErrors?.length) {
        return Effect.succeed<DispatchResult>({
          providerMessageId: d.messageIdHeader,
          recipients: verdicts(d, [], err.rejectedErrors, null),
        })
      }
      const where = [err.code, err.command, err.response ?? err.message].filter(Boolean).join(" ")
      return Effect.fail(new ProviderError({ message: "the mail provider did not accept the message", detail: where }))
    }),
  )
