/**
 * Adapters of the SmsGateway port. The HTTP one speaks the contract of DECISIONS.md:
 * `POST SMS_API_URL` with JSON `{to, message, sender_id}` and `Authorization: Bearer <key>`;
 * any 2xx means sent, and a JSON body may carry `{message_id}`. Its fetch comes from the
 * HttpClient port so tests (and Deno) can hand in their own. The log adapter is the embedded
 * default: OTP codes appear in the service log.
 */
import { Duration, Effect, Layer, Option } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { NotConfigured, ProviderError } from "../../effects/errors.ts"
import { HttpClient, request } from "../../effects/ports/HttpClient.ts"
import { type SmsMessage, type SmsSendOptions, SmsGateway } from "../../effects/ports/SmsGateway.ts"

const TIMEOUT: Duration.Input = "10 seconds"

/** Sends to the provider at `url`, each call within `timeout`; keys and sender id default to the platform's settings. */
export const httpSmsGateway = (url: string, timeout: Duration.Input = TIMEOUT) =>
  Layer.effect(
    SmsGateway,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const http = yield* HttpClient

      const send = Effect.fn("SmsGateway.send")(function*(message: SmsMessage, options: SmsSendOptions = {}) {
        const key = options.apiKey ?? Option.getOrUndefined(config.smsApiKey)
        if (!key) return yield* new NotConfigured({ message: "SMS sending is not configured on this server" })
        const unreachable = (detail: string) => new ProviderError({ message: "the SMS provider could not be reached", detail })
        // One deadline from the lookup to the end of the answer, its body capped (the HttpClient port).
        const answer = yield* request(url, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
          body: JSON.stringify({ to: message.to, message: message.message, sender_id: options.senderId ?? config.smsSenderId }),
        }, timeout).pipe(
          Effect.provideService(HttpClient, http),
          Effect.mapError((e) => unreachable(e.reason === "timeout" ? `no answer within ${Duration.format(Duration.fromInputUnsafe(timeout))}` : e.detail)),
        )
        if (!answer.ok) {
          // The provider's text may echo the key or the message; only the status is kept.
          return yield* new ProviderError({ message: "the SMS provider refused the message", detail: `HTTP ${answer.status}` })
        }
        // A 2xx is a sent message, even when its body (the optional message_id) was cut short.
        return { messageId: messageIdOf(answer.text) }
      })
      return SmsGateway.of({ send })
    }),
  )

const messageIdOf = (text: string): string | null => {
  try {
    const id = (JSON.parse(text) as { message_id?: unknown })?.message_id
    return typeof id === "string" || typeof id === "number" ? String(id) : null
  } catch {
    return null
  }
}

/** The embedded default: the text goes to the log (keys never do). */
export const logSmsGateway = Layer.succeed(
  SmsGateway,
  SmsGateway.of({
    send: (message) =>
      Effect.logInfo(`sms (SMS_API_URL unset, not sent): ${message.message}`).pipe(
        Effect.annotateLogs({ sms_to: message.to }),
        Effect.as({ messageId: null }),
      ),
  }),
)
