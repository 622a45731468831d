/**
 * The embedded default OutboundMailer (SMTP_RELAY_URL unset): nothing leaves the machine. Each
 * message is composed exactly as the relay would send it (outbound-compose.ts, DKIM signature
 * included) and kept in `outbound_captures` with its envelope (every recipient, and each one's
 * VERP return path), so a newcomer can see what would have been sent; every recipient counts as
 * accepted, so sends, charges and lists behave as live.
 */
import { Effect, Layer } from "effect"
import { Database } from "../../effects/ports/Database.ts"
import { type OutboundDispatch, OutboundMailer } from "../../effects/ports/OutboundMailer.ts"
import { compose } from "./outbound-compose.ts"
import { ProviderError } from "../../effects/errors.ts"

export const captureOutboundMailer = Layer.effect(
  OutboundMailer,
  Effect.gen(function*() {
    const db = yield* Database
    const send = Effect.fn("OutboundMailer.capture")(function*(dispatch: OutboundDispatch) {
      const raw = yield* compose(dispatch)
      const [row] = yield* db.query<{ id: number }>(
        `INSERT INTO outbound_captures (user_id, message_id, envelope_from, envelope_to, return_paths, raw, size_bytes)
         VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, decode($6, 'base64'), $7) RETURNING id`,
        // base64 text decoded by the server: far faster than a bytea parameter on PGlite.
        [
          dispatch.userId,
          dispatch.messageId,
          dispatch.from,
          JSON.stringify(dispatch.envelope),
          JSON.stringify(dispatch.returnPaths),
          raw.toString("base64"),
          raw.length,
        ],
      ).pipe(Effect.mapError((e) => new ProviderError({ message: "the capture could not be stored", detail: e.message })))
      yield* Effect.logInfo("outbound mail captured (SMTP_RELAY_URL unset, not delivered)").pipe(
        Effect.annotateLogs({ capture_id: row!.id, outbound_message_id: dispatch.messageId, mail_to: dispatch.envelope.join(", "), mail_subject: dispatch.subject }),
      )
      return {
        providerMessageId: dispatch.messageIdHeader,
        recipients: dispatch.envelope.map((email) => ({ email, accepted: true, code: 250, response: "250 captured (not delivered)" })),
      }
    })
    return OutboundMailer.of({ kind: "capture", send })
  }),
)
