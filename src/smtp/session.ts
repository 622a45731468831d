/**
 * The MX session policy, free of sockets: what to answer at MAIL FROM, RCPT TO and the end of
 * DATA. `src/smtp/mx.ts` feeds smtp-server's callbacks through here; tests call it directly.
 *
 * The reply table below is the one place where service errors become SMTP replies
 * (enhanced status codes per RFC 3463 lead the text).
 */
import { Effect } from "effect"
import { type Envelope, newEnvelope } from "../../effects/ingest/admission.ts"
import { type Delivery, Ingest } from "../../effects/ingest/service.ts"
import { commonReply, reply, replyingWith, SmtpReply } from "./common.ts"

export { SmtpReply }

/** Rejected recipients a connection may collect before it is dropped (Postfix's hard error limit). */
export const MAX_BAD_RECIPIENTS = 20

/** Per-connection state kept by the server between commands. */
export interface MxSessionState {
  /** The current transaction: the addresses its recipients reach and the money held for them. */
  readonly envelope: Envelope
  badRecipients: number
}

export const newSessionState = (): MxSessionState => ({ envelope: newEnvelope(), badRecipients: 0 })

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
    default:
      return commonReply(e)
  }
}

const replying = (rcpt?: string) => replyingWith("mx", (e) => toReply(e, rcpt))

/** Ends the current transaction (a new MAIL FROM, or the connection closing): its holds are freed. */
export const endTransaction = (state: MxSessionState) => Ingest.use((ingest) => ingest.release(state.envelope))

/** MAIL FROM starts a transaction; whatever the previous one (if RSET) still held is let go. */
export const onMailFrom = endTransaction

/**
 * RCPT TO: the recipient reaches an address and its owner can pay for one more copy, or it is a
 * valid VERP return path (free). Refusals with 5xx, a forged return path among them, count
 * toward MAX_BAD_RECIPIENTS.
 */
export const onRecipient = Effect.fnUntraced(function*(state: MxSessionState, recipient: string) {
  const ingest = yield* Ingest
  const admitted = yield* Effect.result(replying(recipient)(ingest.admit(recipient, state.envelope)))
  if (admitted._tag === "Failure") {
    if (admitted.failure.code >= 500 && ++state.badRecipients >= MAX_BAD_RECIPIENTS) {
      return yield* reply(421, "4.7.0 Too many rejected recipients, closing connection")
    }
    return yield* admitted.failure
  }
  return admitted.success
})

/**
 * End of DATA: reads the message as a report for the return paths admitted at RCPT and stores it
 * for the addresses (or, without any admitted recipient, for the delivery's recipients looked up
 * now); the text of the 250 names the stored message ids. The transaction's holds are freed once
 * it is answered, after the commit.
 */
export const onMessage = Effect.fnUntraced(
  function*(state: MxSessionState, delivery: Omit<Delivery, "destinations" | "returnPaths">) {
    const ingest = yield* Ingest
    const destinations = [...state.envelope.destinations.values()]
    const returnPaths = [...state.envelope.returnPaths.values()]
    const admitted = destinations.length > 0 || returnPaths.length > 0
    const ids = yield* replying()(ingest.deliver(admitted ? { ...delivery, destinations, returnPaths } : delivery))
    return ids.length > 0 ? `2.0.0 OK: stored as ${ids.join(",")}` : "2.0.0 OK: delivery report received"
  },
  (effect, state) => Effect.ensuring(effect, endTransaction(state)),
)
