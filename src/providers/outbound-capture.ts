/**
 * The embedded default OutboundMailer (SMTP_RELAY_URL unset): nothing leaves the machine. Each
 * message is composed exactly as the relay would send it (nodemailer's stream transport, DKIM
 * signature included) and kept in `outbound_captures`, so a newcomer can see what would have
 * been sent; every recipient counts as accepted, so sends, charges and lists behave as live.
 */
import { Effect, Layer } from "effect"
import nodemailer from "nodemailer"
import { Database } from "../../effects/ports/Database.ts"
import { OutboundMailer } from "../../effects/ports/OutboundMailer.ts"
import { mailOptions } from "./outbound-compose.ts"
import { ProviderError } from "../../effects/errors.ts"

export const captureOutboundMailer = Layer.effect(
  OutboundMailer,
  Effect.gen(function*() {
    const db = yield* Database
    const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" })
    const send = Effect.fn("OutboundMailer.capture")(function*(dispatch: Parameters<typeof mailOptions>[0]) {
      const info = yield* Effect.tryPromise({
        try: () => transport.sendMail(mailOptions(dispatch)),
        catch: (e) => new ProviderError({ message: "the message could not be composed", detail: String(e) }),
      })
      const raw = info.message as Buffer
      const [row] = yield* db.query<{ id: number }>(
        `INSERT INTO outbound_captures (user_id, message_id, envelope_from, envelope_to, raw, size_bytes)
         VALUES ($1, $2, $3, $4::jsonb, decode($5, 'base64'), $6) RETURNING id`,
        // base64 text decoded by the server: far faster than a bytea parameter on PGlite.
        [dispatch.userId, dispatch.messageId, dispatch.from, JSON.stringify(dispatch.envelope), raw.toString("base64"), raw.length],
      ).pipe(Effect.mapError((e) => new ProviderError({ message: "the capture could not be stored", detail: e.message })))
      yield* Effect.logInfo("outbound mail captured (SMTP_RELAY_URL unset, not delivered)").pipe(
        Effect.annotateLogs({ capture_id: row!.id, outbound_message_id: dispatch.messageId, mail_to: dispatch.envelope.join(", "), mail_subject: dispatch.subject }),
      )
      return {
        providerMessageId: dispatch.messageIdHeader,
        recipients: dispatch.envelope.map((email) => ({ email, accepted: true, code: 250 })),
      }
    })
    return OutboundMailer.of({ kind: "capture", send })
  }),
)
