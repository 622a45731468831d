/**
 * One signed POST to a customer's URL, shared by inbox webhooks and account event endpoints:
 * the secret is opened from its sealed column, the body is signed (signing.ts), and the request
 * leaves through WebhookTransport (SSRF-vetted, pinned, no redirects, bounded answer). What the
 * receiver said becomes an outcome of the shared delivery machine (deliveries/outbox.ts).
 */
import { Clock, Duration, Effect } from "effect"
import { AppConfig } from "../config.ts"
import { type AttemptOutcome, delivered, failed } from "../deliveries/outbox.ts"
import { openText, type SecretboxError } from "../shared/secretbox.ts"
import { signedHeaders } from "./signing.ts"
import { WebhookDeliveryOptions, WebhookTransport } from "./transport.ts"

/** The result of one request to a receiver. */
export type SendOutcome =
  | { readonly _tag: "Answered"; readonly status: number; readonly body: string }
  | { readonly _tag: "Refused"; readonly error: string }
  | { readonly _tag: "Failed"; readonly error: string }

export const isDelivered = (o: SendOutcome): boolean => o._tag === "Answered" && o.status >= 200 && o.status < 300

/** A short, single-line `last_error` (no huge bodies, no control characters). */
export const describeOutcome = (o: SendOutcome): string | null => {
  if (o._tag !== "Answered") return o.error
  if (o.status >= 200 && o.status < 300) return null
  const snippet = o.body.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim().slice(0, 200)
  const what = o.status >= 300 && o.status < 400 ? " (redirects are not followed)" : o.status === 410 ? " Gone (webhook deactivated)" : ""
  return `HTTP ${o.status}${what}${snippet ? `: ${snippet}` : ""}`
}

/** A receiver of signed posts: its URL and its sealed secret. */
export interface SignedTarget {
  readonly url: string
  readonly secret_sealed: string
}

/**
 * The delivery outcome of a request: 2xx delivered, 410 deactivates the target, a refused
 * target (SSRF guard) is final, anything else is retried.
 */
export const attemptOutcome = (o: SendOutcome, at: Date): AttemptOutcome => {
  const statusCode = o._tag === "Answered" ? o.status : null
  if (isDelivered(o)) return delivered({ status_code: statusCode, delivered_at: at })
  const error = describeOutcome(o)!
  if (o._tag === "Answered" && o.status === 410) return failed(error, false, { status_code: statusCode }, true)
  return failed(error, o._tag !== "Refused", { status_code: statusCode })
}

/** Builds the sender: `post(target, secretContext, id, body)` makes one signed request now. */
export const makeSignedPost = Effect.gen(function*() {
  const config = yield* AppConfig
  const transport = yield* WebhookTransport
  const options = yield* WebhookDeliveryOptions
  const timeout = Duration.fromInputUnsafe(options.timeout)

  const post = (target: SignedTarget, secretContext: string, id: string, body: string): Effect.Effect<SendOutcome, SecretboxError> =>
    Effect.gen(function*() {
      const secret = yield* openText(config.secretsKey, target.secret_sealed, secretContext)
      const timestamp = Math.floor(Number(yield* Clock.currentTimeMillis) / 1000)
      const headers = yield* signedHeaders({ secret, id, timestamp, body })
      return yield* transport.post({ url: target.url, headers, body, timeout }).pipe(
        Effect.map((r): SendOutcome => ({ _tag: "Answered", status: r.status, body: r.body })),
        Effect.catchTags({
          WebhookTargetRefused: (e) => Effect.succeed<SendOutcome>({ _tag: "Refused", error: e.message }),
          WebhookRequestFailed: (e) => Effect.succeed<SendOutcome>({ _tag: "Failed", error: e.message }),
        }),
      )
    })

  /** `post`, as the delivery machine wants it: a secret that no longer opens is a final failure. */
  const attempt = (target: SignedTarget, secretContext: string, id: string, body: string): Effect.Effect<AttemptOutcome> =>
    post(target, secretContext, id, body).pipe(
      Effect.catchTag("SecretboxError", () =>
        Effect.succeed<SendOutcome>({ _tag: "Refused", error: "webhook secret cannot be decrypted (SECRETS_KEY changed?)" })),
      Effect.flatMap((o) => Effect.map(Clock.currentTimeMillis, (ms) => attemptOutcome(o, new Date(Number(ms))))),
    )

  return { post, attempt }
})
