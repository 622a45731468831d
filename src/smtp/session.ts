/**
 * The MX session policy, free of sockets: what to answer at RCPT TO and at the end of DATA.
 * `src/smtp/mx.ts` feeds smtp-server's callbacks through here; tests call it directly.
 *
 * The reply table below is the one place where service errors become SMTP replies
 * (enhanced status codes per RFC 3463 lead the text).
 */
import { Cause, Effect } from "effect"
import type { Route } from "../../effects/addresses/schema.ts"
import { type Delivery, Ingest } from "../../effects/ingest/service.ts"
import { SmtpReply } from "./common.ts"

export { SmtpReply }

/** Rejected recipients a connection may collect before it is dropped (Postfix's hard error limit). */
export const MAX_BAD_RECIPIENTS = 20

/** Per-connection state kept by the server between commands. */
export interface MxSessionState {
  /** Routes of recipients accepted on this connection, by lowercase envelope address. */
  readonly routes: Map<string, Route>
  badRecipients: number
}

export const newSessionState = (): MxSessionState => ({ routes: new Map(), badRecipients: 0 })

const reply = (code: number, message: string) => new SmtpReply({ code, message })

const LOCAL_ERROR = reply(451, "4.3.0 Local error in processing, try again later")

/** Service error → SMTP reply. Anything not listed is a local, temporary failure. */
export const toReply = (e: { readonly _tag: string }, rcpt?: string): SmtpReply => {
  const who = rcpt ? `<${rcpt}>: ` : ""
  switch (e._tag) {
    case "UnknownRecipient":
      return reply(550, `5.1.1 ${who}Recipient address rejected: no such mailbox`)
    case "DomainSuspended":
      return reply(451, `4.4.3 ${who}Domain's DNS records are not in place, try again later`)
    case "InsufficientBalance":
      return reply(452, `4.2.2 ${who}Mailbox cannot accept mail right now, try again later`)
    case "MalformedMessage":
      return reply(554, "5.6.0 Message could not be parsed")
    case "SmtpReply":
      return e as SmtpReply
    default:
      return LOCAL_ERROR
  }
}

/** Failures and defects alike end in a reply; the cause of a local error is logged. */
const replying = <A, R>(effect: Effect.Effect<A, { readonly _tag: string }, R>, rcpt?: string) =>
  effect.pipe(
    Effect.catchCause((cause) => {
      const failure = cause.reasons.find(Cause.isFailReason)
      const answer = failure ? toReply(failure.error, rcpt) : LOCAL_ERROR
      return (answer === LOCAL_ERROR ? Effect.logError("mx: local error", cause) : Effect.void).pipe(
        Effect.andThen(Effect.fail(answer)),
      )
    }),
  )

/**
 * RCPT TO. `envelope` holds the recipients already accepted in this transaction (their charges
 * count against the wallet together with this one).
 */
export const onRecipient = (state: MxSessionState, recipient: string, envelope: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const ingest = yield* Ingest
    const accepted = envelope.flatMap((a) => state.routes.get(a.toLowerCase()) ?? [])
    const admitted = yield* Effect.result(replying(ingest.admit(recipient, accepted), recipient))
    if (admitted._tag === "Failure") {
      if (admitted.failure.code >= 500 && ++state.badRecipients >= MAX_BAD_RECIPIENTS) {
        return yield* reply(421, "4.7.0 Too many rejected recipients, closing connection")
      }
      return yield* admitted.failure
    }
    state.routes.set(recipient.toLowerCase(), admitted.success)
    return admitted.success
  })

/** End of DATA: stores the message; the text of the 250 names the stored message ids. */
export const onMessage = (delivery: Delivery) =>
  Effect.gen(function*() {
    const ingest = yield* Ingest
    const ids = yield* replying(ingest.deliver(delivery))
    return `2.0.0 OK: stored as ${ids.join(",")}`
  })
