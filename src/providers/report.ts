/**
 * What start-up says about each provider (DECISIONS.md "Production mode"): which adapter runs,
 * and whether it is the real thing, an embedded stand-in (fake gateway, capture transport, the
 * log), or not configured at all (AI and Google answer 503). Hosts only, never credentials.
 */
import { Option } from "effect"
import { chosenProviders, type Settings } from "../../effects/config.ts"

export interface ProviderLine {
  readonly provider: "payments" | "outbound-mail" | "platform-mail" | "sms" | "ai" | "google"
  readonly adapter: string
  readonly kind: "real" | "stand-in" | "not configured"
}

/** `https://user:pass@host:port/path` → `host:port` (a URL that does not parse: "configured URL"). */
const hostOf = (url: string): string => (URL.canParse(url) && new URL(url).host) || "configured URL"

export const providerReport = (s: Settings): ReadonlyArray<ProviderLine> => {
  const chosen = chosenProviders(s)
  const url = (o: Option.Option<string>) => Option.match(o, { onNone: () => "?", onSome: hostOf })
  return [
    chosen.payment === "http"
      ? { provider: "payments", adapter: `HTTP gateway at ${url(s.paymentApiUrl)}`, kind: "real" }
      : { provider: "payments", adapter: "fake gateway (anyone can complete a top-up)", kind: "stand-in" },
    chosen.outboundMail === "relay"
      ? { provider: "outbound-mail", adapter: `SMTP relay at ${url(s.smtpRelayUrl)}`, kind: "real" }
      : { provider: "outbound-mail", adapter: "local capture transport (nothing is delivered)", kind: "stand-in" },
    chosen.platformMail === "relay"
      ? { provider: "platform-mail", adapter: `SMTP relay at ${url(s.smtpRelayUrl)}`, kind: "real" }
      : { provider: "platform-mail", adapter: "service log (verification links are not mailed)", kind: "stand-in" },
    chosen.sms === "http"
      ? { provider: "sms", adapter: `HTTP SMS provider at ${url(s.smsApiUrl)}`, kind: "real" }
      : { provider: "sms", adapter: "service log (codes are not sent)", kind: "stand-in" },
    Option.isSome(s.aiBaseUrl) && Option.isSome(s.aiApiKey)
      ? { provider: "ai", adapter: `OpenAI-compatible gateway at ${url(s.aiBaseUrl)}, model ${s.aiModel}`, kind: "real" }
      : { provider: "ai", adapter: "none (drafts answer 503)", kind: "not configured" },
    Option.isSome(s.googleClientId)
      ? { provider: "google", adapter: `id_token checked against ${hostOf(s.googleJwksUrl)}`, kind: "real" }
      : { provider: "google", adapter: "none (Google sign-in answers 503)", kind: "not configured" },
  ]
}
