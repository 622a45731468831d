/**
 * OutboundMailer over the SMTP relay (SMTP_RELAY_URL): nodemailer on the same transport
 * construction as platform mail, pooled so a batch's messages share a few connections. The
 * relay's reply to each RCPT TO is the verdict for that recipient; DKIM signing happens here
 * with the key of the verified own domain the message goes from. Each recipient is its own
 * transaction (its VERP return path as MAIL FROM; outbound-compose.ts).
 */
import { type Duration, Effect, Layer } from "effect"
import { OutboundMailer } from "../../effects/ports/OutboundMailer.ts"
import { sendAndRead } from "./outbound-compose.ts"
import { RELAY_DEADLINE, relayTransport } from "./platform-mailer.ts"

/** Connections kept open to the relay; also how many messages of a batch chunk are in flight. */
export const RELAY_CONNECTIONS = 5

/** Each message within `deadline` (RELAY_DEADLINE): a stalling relay fails the send (502, refunded). */
export const relayOutboundMailer = (url: string, deadline: Duration.Input = RELAY_DEADLINE) =>
  Layer.effect(
    OutboundMailer,
    Effect.gen(function*() {
      const transport = yield* relayTransport(url, { pool: true, maxConnections: RELAY_CONNECTIONS })
      return OutboundMailer.of({
        kind: "relay",
        send: (dispatch) => sendAndRead(transport, dispatch, RELAY_CONNECTIONS, deadline).pipe(Effect.withSpan("OutboundMailer.relay")),
      })
    }),
  )
