/**
 * The platform's mail and SMS adapters, chosen from the settings: live adapters when their
 * provider is configured, the log otherwise. Part of the runtime's infrastructure, so a test's
 * own adapters (`makeTestApp({ infrastructure })`) replace them.
 */
import { Effect, Layer, Option } from "effect"
import { AppConfig, chosenProviders, smsSends } from "../../effects/config.ts"
import { aiGatewayLayer } from "./ai-gateway.ts"
import { logPlatformMailer, relayPlatformMailer } from "./platform-mailer.ts"
import { httpSmsGateway, logSmsGateway } from "./sms.ts"

export const platformProvidersLayer = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const chosen = chosenProviders(config)
    const mailer = chosen.platformMail === "relay" && Option.isSome(config.smtpRelayUrl)
      ? relayPlatformMailer(config.smtpRelayUrl.value, config.platformFrom)
      : logPlatformMailer
    const sms = smsSends(config) && Option.isSome(config.smsApiUrl) ? httpSmsGateway(config.smsApiUrl.value) : logSmsGateway
    return Layer.mergeAll(mailer, sms, aiGatewayLayer)
  }),
)
