/**
 * Production mode (DECISIONS.md "Production mode: no fake in production by accident"). With
 * `NODE_ENV=production`, a forgotten setting must stop start-up, not quietly run a stand-in: the
 * fake gateway would let anyone credit their own wallet, and captured or logged mail and SMS
 * would silently never arrive. Every provider is either configured or named as its stand-in.
 * Outside production the embedded defaults stay (one command, nothing to configure).
 */
import { Option } from "effect"
import type { MailTransport, PaymentProvider, PlatformMail, SmsProvider } from "../effects/config.ts"

/** The explicit choices, each unset or one of its names. */
export const PROVIDER_CHOICES = {
  PAYMENT_PROVIDER: ["fake", "http"],
  MAIL_TRANSPORT: ["capture", "relay"],
  SMS_PROVIDER: ["log", "http"],
  PLATFORM_MAIL: ["log", "relay"],
} as const satisfies Record<string, ReadonlyArray<string>>

export interface ProviderSettings {
  readonly jwtSecret: Option.Option<unknown>
  readonly secretsKey: Option.Option<unknown>
  readonly smtpRelayUrl: Option.Option<string>
  readonly smsApiUrl: Option.Option<string>
  readonly smsApiKey: Option.Option<string>
  readonly paymentApiUrl: Option.Option<string>
  readonly paymentApiKey: Option.Option<string>
  readonly paymentWebhookSecret: Option.Option<string>
  readonly paymentProvider: Option.Option<PaymentProvider>
  readonly mailTransport: Option.Option<MailTransport>
  readonly smsProvider: Option.Option<SmsProvider>
  readonly platformMail: Option.Option<PlatformMail>
}

/** A live adapter chosen by name needs its URL, in any mode. */
export const choiceProblems = (s: ProviderSettings): Array<string> => [
  ...(Option.contains(s.paymentProvider, "http") && Option.isNone(s.paymentApiUrl)
    ? ["Invalid setting PAYMENT_PROVIDER: http needs PAYMENT_API_URL"]
    : []),
  ...(Option.contains(s.mailTransport, "relay") && Option.isNone(s.smtpRelayUrl) ? ["Invalid setting MAIL_TRANSPORT: relay needs SMTP_RELAY_URL"] : []),
  ...(Option.contains(s.platformMail, "relay") && Option.isNone(s.smtpRelayUrl) ? ["Invalid setting PLATFORM_MAIL: relay needs SMTP_RELAY_URL"] : []),
  ...(Option.contains(s.smsProvider, "http") && Option.isNone(s.smsApiUrl) ? ["Invalid setting SMS_PROVIDER: http needs SMS_API_URL"] : []),
]

const live = <A extends string>(choice: Option.Option<A>, standIn: A, url: Option.Option<string>) =>
  Option.match(choice, { onNone: () => Option.isSome(url), onSome: (c) => c !== standIn })

/** What production mode misses, one line each (empty: start). */
export const productionProblems = (s: ProviderSettings): Array<string> => {
  const problems: Array<string> = []
  const missing = (name: string, why: string) => problems.push(`${name} is not set: ${why}`)
  if (Option.isNone(s.jwtSecret)) missing("JWT_SECRET", "production needs a fixed signing key (32 bytes as 64 hex), not one generated into DATA_DIR")
  if (Option.isNone(s.secretsKey)) missing("SECRETS_KEY", "production needs a fixed encryption key (32 bytes as 64 hex), not one generated into DATA_DIR")

  if (Option.isNone(s.paymentProvider) && Option.isNone(s.paymentApiUrl)) {
    missing("PAYMENT_API_URL", "configure the payment gateway, or choose the development stand-in explicitly with PAYMENT_PROVIDER=fake")
  } else if (live(s.paymentProvider, "fake", s.paymentApiUrl)) {
    if (Option.isNone(s.paymentApiKey)) missing("PAYMENT_API_KEY", "the payment gateway at PAYMENT_API_URL needs its key")
    if (Option.isNone(s.paymentWebhookSecret)) {
      missing("PAYMENT_WEBHOOK_SECRET", "the gateway's events cannot be verified without the secret it signs them with")
    }
  }
  if (Option.isNone(s.mailTransport) && Option.isNone(s.smtpRelayUrl)) {
    missing("SMTP_RELAY_URL", "customer mail would only be captured locally; configure the relay, or choose that explicitly with MAIL_TRANSPORT=capture")
  }
  if (Option.isNone(s.platformMail) && Option.isNone(s.smtpRelayUrl)) {
    missing("SMTP_RELAY_URL", "verification mail would only be written to the log; configure the relay, or choose that explicitly with PLATFORM_MAIL=log")
  }
  if (Option.isNone(s.smsProvider) && Option.isNone(s.smsApiUrl)) {
    missing("SMS_API_URL", "verification codes would only be written to the log; configure the SMS provider, or choose that explicitly with SMS_PROVIDER=log")
  } else if (live(s.smsProvider, "log", s.smsApiUrl) && Option.isNone(s.smsApiKey)) {
    missing("SMS_API_KEY", "the platform's own SMS (verification codes) need the provider key")
  }
  return problems
}
