/**
 * Adapters of the PlatformMailer port: the SMTP relay (SMTP_RELAY_URL, via nodemailer) and the
 * embedded default that writes each mail to the service log, so a developer can open the
 * verification link without any mail setup.
 */
import { Effect, Layer } from "effect"
import nodemailer from "nodemailer"
import { ProviderError } from "../../effects/errors.ts"
import { type PlatformMail, PlatformMailer } from "../../effects/ports/PlatformMailer.ts"

/**
 * A nodemailer transport to the relay at `url` (`smtp://user:pass@host:port`, `smtps://…`),
 * closed with the scope. Shared by platform mail and outbound mail (src/providers/outbound-relay.ts),
 * which pools connections because batches send many messages at once.
 */
export const relayTransport = (url: string, options: { readonly pool?: boolean; readonly maxConnections?: number } = {}) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      nodemailer.createTransport({ url, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000, ...options })
    ),
    (t) => Effect.sync(() => t.close()),
  )

/** Sends through the relay at `url` from `from`. */
export const relayPlatformMailer = (url: string, from: string) =>
  Layer.effect(
    PlatformMailer,
    Effect.gen(function*() {
      const transport = yield* relayTransport(url)
      const send = Effect.fn("PlatformMailer.send")(function*(mail: PlatformMail) {
        yield* Effect.tryPromise({
          try: () => transport.sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text, ...(mail.html ? { html: mail.html } : {}) }),
          catch: (e) => new ProviderError({ message: "the mail relay did not accept the message", detail: String(e) }),
        })
      })
      return PlatformMailer.of({ send })
    }),
  )

/**
 * The embedded default: the mail goes to the log at info level, its links also as `mail_links`
 * so a developer can copy the verification link from one JSON field.
 */
export const logPlatformMailer = Layer.succeed(
  PlatformMailer,
  PlatformMailer.of({
    send: (mail) =>
      Effect.logInfo(`platform mail (SMTP_RELAY_URL unset, not sent)\n${mail.text}`).pipe(
        Effect.annotateLogs({ mail_to: mail.to, mail_subject: mail.subject, mail_links: mail.text.match(/https?:\/\/\S+/g) ?? [] }),
      ),
  }),
)
