/**
 * In-memory PlatformMailer and SmsGateway for tests: every mail and SMS is kept, so a test can
 * read the verification link or OTP code the way a user would read their inbox or phone.
 * Also the explicit test settings of the account flows: cheap password hashing (the default
 * cost is ~0.4 s per hash) and roomy auth rate limits (every test request comes from 127.0.0.1).
 */
import { Effect, Layer } from "effect"
import { AuthRateLimits, DEFAULT_AUTH_RATE_LIMITS } from "../../effects/accounts/limits.ts"
import { PasswordHashing } from "../../effects/accounts/password.ts"
import { ProviderError } from "../../effects/errors.ts"
import { type PlatformMail, PlatformMailer } from "../../effects/ports/PlatformMailer.ts"
import { SmsGateway, type SmsMessage, type SmsSendOptions } from "../../effects/ports/SmsGateway.ts"

export interface SentSms extends SmsMessage {
  readonly options: SmsSendOptions
}

export interface Outbox {
  readonly mails: Array<PlatformMail>
  readonly sms: Array<SentSms>
  /** When true, every send fails with PROVIDER_ERROR. */
  failing: boolean
  readonly layer: Layer.Layer<PlatformMailer | SmsGateway>
  /** The token of the newest verification link sent to `to`. */
  readonly lastToken: (to: string) => string
  /** The newest 6-digit code sent to `to`. */
  readonly lastCode: (to: string) => string
}

export const makeOutbox = (): Outbox => {
  const mails: Array<PlatformMail> = []
  const sms: Array<SentSms> = []
  const state = { failing: false }
  const fail = () => Effect.fail(new ProviderError({ message: "test provider is down" }))
  const layer = Layer.mergeAll(
    Layer.succeed(PlatformMailer, PlatformMailer.of({ send: (mail) => state.failing ? fail() : Effect.sync(() => void mails.push(mail)) })),
    Layer.succeed(
      SmsGateway,
      SmsGateway.of({
        send: (message, options = {}) =>
          state.failing ? fail() : Effect.sync(() => {
            sms.push({ ...message, options })
            return { messageId: `sms-${sms.length}` }
          }),
      }),
    ),
  )
  return {
    mails,
    sms,
    get failing() {
      return state.failing
    },
    set failing(value: boolean) {
      state.failing = value
    },
    layer,
    lastToken: (to) => {
      const mail = mails.findLast((m) => m.to === to)
      const token = mail && /verify-email\?token=(\S+)/.exec(mail.text)?.[1]
      if (!token) throw new Error(`no verification link was sent to ${to}`)
      return decodeURIComponent(token)
    },
    lastCode: (to) => {
      const code = sms.findLast((s) => s.to === to)?.message.match(/\b(\d{6})\b/)?.[1]
      if (!code) throw new Error(`no code was sent to ${to}`)
      return code
    },
  }
}

/** Hashing cheap enough for tests (the format and code path are the production ones). */
export const fastHashing = Layer.succeed(PasswordHashing, { logN: 10, r: 8, p: 1 })

/** Auth limits no ordinary test reaches; rate-limit tests set their own. */
export const roomyAuthLimits = Layer.succeed(AuthRateLimits, {
  ...Object.fromEntries(Object.entries(DEFAULT_AUTH_RATE_LIMITS).map(([k, v]) => [k, { ...v, limit: 10_000 }])),
} as unknown as typeof DEFAULT_AUTH_RATE_LIMITS)
