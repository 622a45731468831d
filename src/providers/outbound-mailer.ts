/**
 * Which OutboundMailer runs: the SMTP relay (SMTP_RELAY_URL), or the local capture transport
 * (DECISIONS.md "Providers": the embedded default for customer mail; MAIL_TRANSPORT names it).
 */
import { Effect, Layer, Option } from "effect"
import { AppConfig, chosenProviders } from "../../effects/config.ts"
import { captureOutboundMailer } from "./outbound-capture.ts"
import { relayOutboundMailer } from "./outbound-relay.ts"

export const outboundMailerLayer = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    return chosenProviders(config).outboundMail === "relay" && Option.isSome(config.smtpRelayUrl)
      ? relayOutboundMailer(config.smtpRelayUrl.value)
      : captureOutboundMailer
  }),
)
