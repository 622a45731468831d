/**
 * Adapters of the PlatformMailer port: the SMTP relay (SMTP_RELAY_URL, via nodemailer) and the
 * embedded default that writes each mail to the service log, so a developer can open the
 * verification link without any mail setup.
 */
import { Duration, Effect, Layer } from "effect"
import type { SendMailOptions } from "nodemailer"
import type SMTPTransport from "nodemailer/lib/smtp-transport"
import { ProviderError } from "../../effects/errors.ts"
import { MAX_RESPONSE_BYTES } from "../../effects/ports/HttpClient.ts"
import { type PlatformMail, PlatformMailer } from "../../effects/ports/PlatformMailer.ts"

/**
 * A nodemailer transport to the relay at `url` (`smtp://user:pass@host:port`, `smtps://…`),
 * closed with the scope. Shared by platform mail and outbound mail (src/providers/outbound-relay.ts),
 * which pools connections because batches send many messages at once.
 */
export const relayTransport = (url: string, options: { readonly pool?: boolean; readonly maxConnections?: number } = {}) =>
  Effect.acquireRelease(
    // nodemailer is loaded here, not when this module is: the embedded defaults never relay.
    Effect.promise(() => import("nodemailer")).pipe(Effect.map(({ default: nodemailer }) =>
      nodemailer.createTransport({
        url,
        dnsTimeout: 10_000,
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 30_000,
        // The most of one relay reply ever held (nodemailer's own default, stated with ours).
        maxResponseSize: MAX_RESPONSE_BYTES,
        ...options,
      } as SMTPTransport.Options)
    )),
    (t) => Effect.sync(() => t.close()),
  )

/**
 * The longest one message may take at the relay: lookup, connect, greeting, AUTH and the whole
 * transaction. nodemailer's own timeouts are per phase (and the idle one restarts with every
 * byte), so a relay trickling its replies could otherwise hold a send for ever.
 */
export const RELAY_DEADLINE: Duration.Input = "60 seconds"

/**
 * `transport.sendMail(options)` under one deadline. At the deadline the message is aborted
 * (nodemailer closes the connection delivering it; a pool keeps its other connections) and the
 * send fails with `onTimeout()`.
 */
export const sendWithin = <E>(
  transport: { sendMail: (o: SendMailOptions) => Promise<unknown> },
  options: SendMailOptions,
  deadline: Duration.Input,
  onError: (e: unknown) => E,
) =>
  Effect.tryPromise({
    // `signal` is nodemailer's per-message abort (not in @types/nodemailer yet).
    try: (signal) => transport.sendMail({ ...options, signal } as SendMailOptions),
    catch: onError,
  }).pipe(
    Effect.timeoutOrElse({
      duration: deadline,
      orElse: () => Effect.fail(onError(new Error(`ETIMEDOUT: no answer from the relay within ${Duration.format(Duration.fromInputUnsafe(deadline))}`))),
    }),
  )

/** Sends through the relay at `url` from `from`, each message within `deadline`. */
export const relayPlatformMailer = (url: string, from: string, deadline: Duration.Input = RELAY_DEADLINE) =>
  Layer.effect(
    PlatformMailer,
    Effect.gen(function*() {
      const transport = yield* relayTransport(url)
      const send = Effect.fn("PlatformMailer.send")(function*(mail: PlatformMail) {
        yield* sendWithin(
          transport,
          { from, to: mail.to, subject: mail.subject, text: mail.text, ...(mail.html ? { html: mail.html } : {}) },
          deadline,
          (e) => new ProviderError({ message: "the mail relay did not accept the message", detail: String(e) }),
        )
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
