/**
 * Which OutboundMailer runs: the SMTP relay when SMTP_RELAY_URL is set, else the local capture
 * transport (DECISIONS.md "Providers": the embedded default for customer mail).
 */
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { captureOutboundMailer } from "./outbound-capture.ts"
import { relayOutboundMailer } from "./outbound-relay.ts"

export const outboundMailerLayer = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    return Option.match(config.smtpRelayUrl, { onNone: () => captureOutboundMailer, onSome: relayOutboundMailer })
  }),
)
