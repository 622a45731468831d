/**
 * Adapters of the PlatformMailer port: the SMTP relay (SMTP_RELAY_URL, via nodemailer) and the
 * embedded default that writes each mail to the service log, so a developer can open the
 * verification link without any mail setup.
 */
import { Effect, Layer } from "effect"
import nodemailer from "nodemailer"
import { ProviderError } from "../../effects/errors.ts"
import { type PlatformMail, PlatformMailer } from "../../effects/ports/PlatformMailer.ts"

/** Sends through the relay at `url` (`smtp://user:pass@host:port`, `smtps://…`) from `from`. */
export const relayPlatformMailer = (url: string, from: string) =>
  Layer.effect(
    PlatformMailer,
    Effect.gen(function*() {
      const transport = yield* Effect.acquireRelease(
        Effect.sync(() =>
          nodemailer.createTransport({ url, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 })
        ),
        (t) => Effect.sync(() => t.close()),
      )
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
