/**
 * The AI gateway port: one chat completion (a system prompt and the conversation so far) → the
 * assistant's text. The live adapter (src/providers/ai-openai.ts) speaks OpenAI-compatible
 * `chat.completions` through the `openai` client; without AI_BASE_URL and AI_API_KEY every
 * call fails NOT_CONFIGURED (503).
 *
 * Failures carry no provider text: `ProviderError.detail` is one of `HTTP <status>`, `timeout`,
 * `connection error` or `empty answer`, so callers can decide whether to retry and may show it.
 */
import { Context, Effect, Layer } from "effect"
import { NotConfigured, type ProviderError } from "../errors.ts"

export interface AiMessage {
  readonly role: "user" | "assistant"
  readonly content: string
}

export interface AiCompletion {
  readonly system: string
  readonly messages: ReadonlyArray<AiMessage>
}

export interface AiGatewayShape {
  /** The assistant's answer, trimmed and non-empty. */
  readonly complete: (request: AiCompletion) => Effect.Effect<string, ProviderError | NotConfigured>
}

export class AiGateway extends Context.Service<AiGateway, AiGatewayShape>()("app/AiGateway") {
  /** The embedded default: nothing configured, every call answers 503 NOT_CONFIGURED. */
  static readonly notConfigured = Layer.succeed(
    AiGateway,
    AiGateway.of({ complete: () => Effect.fail(new NotConfigured({ message: "the AI gateway is not configured on this server" })) }),
  )
}

/** Whether another attempt can help: timeouts, connection errors, 408, 429, 5xx and empty answers. */
export const retryableAiError = (e: ProviderError | NotConfigured): boolean => {
  if (e._tag === "NotConfigured") return false
  const status = /^HTTP (\d{3})$/.exec(e.detail ?? "")?.[1]
  return status === undefined || !status.startsWith("4") || status === "408" || status === "429"
}
