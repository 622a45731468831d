/**
 * What both outbound adapters share: the message composed once from a dispatch (the relay sends
 * it, the capture transport keeps it, so a capture is byte for byte what the relay would have
 * sent, DKIM signature included), and the sending of those bytes to the relay.
 *
 * One SMTP transaction per recipient: each recipient's MAIL FROM is its own VERP return path
 * (effects/bounces/verp.ts), so a bounce or complaint names the recipient it is about. Every
 * transaction carries the same composed bytes (one Message-ID, one DKIM signature; Bcc in no
 * header), over the transport's pooled connections.
 */
import { type Duration, Effect, Option } from "effect"
import type { NodemailerError, SendMailOptions } from "nodemailer"
import { ProviderError } from "../../effects/errors.ts"
import { loadOnce } from "../../effects/shared/load-once.ts"
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
  // Bcc recipients are in no header; the envelopes are set per transaction.
  ...(Option.isSome(d.dkim) ? { dkim: { ...d.dkim.value } } : {}),
})

// Composition only (no connection): nodemailer's stream transport renders and DKIM-signs. Made
// with the first message composed (see effects/shared/load-once.ts).
const composer = loadOnce(() =>
  import("nodemailer").then(({ default: nodemailer }) => nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" }))
)

/** The message as it goes out to every recipient. */
export const compose = (d: OutboundDispatch): Effect.Effect<Buffer, ProviderError> =>
  Effect.tryPromise({
    try: () => composer().then((c) => c.sendMail(mailOptions(d))).then((info) => info.message as Buffer),
    catch: (e) => new ProviderError({ message: "the message could not be composed", detail: String(e) }),
  })

/** The reply code at the start of an SMTP reply (`250 2.0.0 Ok` → 250). */
export const replyCode = (response: unknown): number | null => {
  const m = /^(\d{3})\b/.exec(String(response ?? ""))
  return m ? Number(m[1]) : null
}

const stripBrackets = (id: string) => id.replace(/^<|>$/g, "")

interface SmtpInfo {
  readonly response?: unknown
  readonly serverMessageId?: string
}

type Relay = { sendMail: (o: SendMailOptions) => Promise<SmtpInfo> }

/** How one recipient's transaction ended. */
type Transaction =
  | { readonly _tag: "Accepted"; readonly verdict: RecipientVerdict }
  /** Refused at RCPT TO: an answer about this recipient. */
  | { readonly _tag: "Refused"; readonly verdict: RecipientVerdict }
  /** Refused at MAIL FROM or DATA, or the connection failed: nothing said about the recipient. */
  | { readonly _tag: "Broken"; readonly email: string; readonly detail: string }

const oneLine = (s: unknown) => String(s ?? "").replace(/\s+/g, " ").trim()

const transaction = (relay: Relay, raw: Buffer, email: string, returnPath: string, deadline: Duration.Input): Effect.Effect<Transaction> =>
  // One deadline per transaction (DECISIONS "Hostile input"): a relay that stalls breaks it.
  sendWithin(relay, { envelope: { from: returnPath, to: [email] }, raw }, deadline, (e) => e as NodemailerError).pipe(
    Effect.map((info) => info as SmtpInfo),
    Effect.map((info): Transaction => ({
      _tag: "Accepted",
      verdict: {
        email,
        accepted: true,
        code: replyCode(info.response),
        response: oneLine(info.response) || null,
        providerMessageId: info.serverMessageId ?? null,
      },
    })),
    Effect.catch((err: NodemailerError) => {
      const refusal = err.code === "EENVELOPE" && err.command === "RCPT TO" ? err.rejectedErrors?.[0] : undefined
      if (refusal) {
        const response = oneLine(refusal.response ?? refusal.message)
        return Effect.succeed<Transaction>({
          _tag: "Refused",
          verdict: { email, accepted: false, code: refusal.responseCode ?? replyCode(refusal.response), response: response || null },
        })
      }
      const detail = [err.code, err.command, err.response ?? err.message].filter(Boolean).join(" ")
      return Effect.succeed<Transaction>({ _tag: "Broken", email, detail })
    }),
  )

/**
 * Sends `raw` to every envelope recipient, each in its own transaction with its return path,
 * up to `concurrency` at once. Only a failure of the message as a whole is an error: no recipient
 * accepted and at least one transaction broken (unreachable relay, MAIL FROM or DATA refused).
 */
export const sendEach = (
  relay: Relay,
  d: OutboundDispatch,
  raw: Buffer,
  concurrency: number,
  deadline: Duration.Input = RELAY_DEADLINE,
): Effect.Effect<DispatchResult, ProviderError> =>
  Effect.gen(function*() {
    const done = yield* Effect.forEach(d.envelope, (email, i) => transaction(relay, raw, email, d.returnPaths[i]!, deadline), { concurrency })
    const accepted = done.flatMap((t) => (t._tag === "Accepted" ? [t.verdict] : []))
    const broken = done.flatMap((t) => (t._tag === "Broken" ? [t] : []))
    if (accepted.length === 0 && broken.length > 0) {
      return yield* new ProviderError({ message: "the mail provider did not accept the message", detail: broken[0]!.detail })
    }
    return {
      providerMessageId: stripBrackets(accepted.find((v) => v.providerMessageId)?.providerMessageId ?? d.messageIdHeader),
      recipients: done.map((t): RecipientVerdict =>
        // A transaction that broke after others went through: not delivered, not the address's fault.
        t._tag === "Broken" ? { email: t.email, accepted: false, code: null, response: t.detail } : t.verdict
      ),
    }
  })

/** Composes once, then sends to each recipient through `relay`. */
export const sendAndRead = (
  relay: Relay,
  d: OutboundDispatch,
  concurrency: number,
  deadline: Duration.Input = RELAY_DEADLINE,
): Effect.Effect<DispatchResult, ProviderError> => Effect.flatMap(compose(d), (raw) => sendEach(relay, d, raw, concurrency, deadline))
