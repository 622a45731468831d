/**
 * The port through which webhook requests leave the process. The live adapter
 * (src/providers/webhook-http.ts) resolves the host, refuses private targets unless
 * WEBHOOK_ALLOW_PRIVATE, pins the connection to the vetted address (no DNS rebinding between
 * check and connect), never follows redirects, and reads only the first bytes of an answer.
 */
import { Context, Duration, Schema } from "effect"
import type { Effect } from "effect"

/** The target resolves to an address this server must not call (loopback, private, …). */
export class WebhookTargetRefused extends Schema.TaggedError<WebhookTargetRefused>()("WebhookTargetRefused", {
  message: Schema.String,
}) {}

/** No HTTP answer: DNS failure, refused or reset connection, TLS error, timeout. */
export class WebhookRequestFailed extends Schema.TaggedError<WebhookRequestFailed>()("WebhookRequestFailed", {
  message: Schema.String,
}) {}

export interface WebhookRequest {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** For the whole attempt: connect, send, status line. */
  readonly timeout: Duration.Duration
}

export interface WebhookResponse {
  readonly status: number
  /** At most the first KiB of the body (for `last_error`); empty for 2xx. */
  readonly body: string
}

export interface WebhookTransportShape {
  readonly post: (request: WebhookRequest) => Effect.Effect<WebhookResponse, WebhookTargetRefused | WebhookRequestFailed>
}

export class WebhookTransport extends Context.Service<WebhookTransport, WebhookTransportShape>()("app/WebhookTransport") {}

export interface WebhookDeliveryOptions {
  /** Per attempt (SPEC.md: 10 s). Tests shorten it to exercise receivers that hang. */
  readonly timeout: Duration.Input
  /**
   * How often the worker claims due rows without being woken (default 2 s: rows of stopped
   * instances, retries other instances scheduled). Tests lengthen it so that only a commit's
   * handoff or wake-up can start a delivery in time.
   */
  readonly pollInterval?: Duration.Input
}

/** Tunables of webhook delivery; override with `Layer.succeed(WebhookDeliveryOptions, …)`. */
export const WebhookDeliveryOptions = Context.Reference<WebhookDeliveryOptions>("app/WebhookDeliveryOptions", {
  defaultValue: () => ({ timeout: "10 seconds" }),
})
