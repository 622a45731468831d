/**
 * The live AiGateway adapter: OpenAI-compatible `chat.completions` through the `openai` client
 * (DECISIONS.md "Providers"), at AI_BASE_URL with AI_API_KEY and AI_MODEL. Its fetch comes from
 * the HttpClient port, so msw handlers (and Deno, where msw cannot patch the global fetch) see
 * every request. The client's own retries are off: the agent worker retries durably, and a draft
 * preview answers 502 at once. Each call is bounded by `timeout` on the Effect clock (the
 * request is aborted), with the client's timeout a little later as a backstop.
 *
 * Nothing the provider says reaches a user or the log: failures become ProviderError with
 * `detail` = `HTTP <status>`, `timeout`, `response too large` (over the port's 1 MiB),
 * `connection error` or `empty answer`.
 */
import { Duration, Effect, Layer } from "effect"
import OpenAI, { APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai"
import { ProviderError } from "../../effects/errors.ts"
import { type AiCompletion, AiGateway } from "../../effects/ports/AiGateway.ts"
import { HttpClient, HttpDeadlineExceeded, HttpResponseTooLarge } from "../../effects/ports/HttpClient.ts"

/** How long one completion may take (an answer is a few hundred tokens). */
export const AI_TIMEOUT: Duration.Input = "30 seconds"

const failed = (detail: string) => new ProviderError({ message: "the AI gateway did not answer", detail })

/** The port's own refusals, however deep the openai client wrapped them. */
const portLimit = (e: unknown, depth = 0): "timeout" | "response too large" | undefined =>
  e instanceof HttpDeadlineExceeded
    ? "timeout"
    : e instanceof HttpResponseTooLarge
    ? "response too large"
    : depth < 4 && typeof e === "object" && e !== null && "cause" in e
    ? portLimit(e.cause, depth + 1)
    : undefined

const toProviderError = (e: unknown): ProviderError =>
  portLimit(e) !== undefined
    ? failed(portLimit(e)!)
    : e instanceof APIConnectionTimeoutError
    ? failed("timeout")
    : e instanceof APIError && typeof e.status === "number" && !(e instanceof APIUserAbortError)
    ? failed(`HTTP ${e.status}`)
    : failed("connection error")

export interface OpenAiGatewayOptions {
  readonly baseURL: string
  readonly apiKey: string
  readonly model: string
  readonly timeout?: Duration.Input
}

export const openAiGateway = (options: OpenAiGatewayOptions) =>
  Layer.effect(
    AiGateway,
    Effect.gen(function*() {
      const http = yield* HttpClient
      const timeout = Duration.fromInputUnsafe(options.timeout ?? AI_TIMEOUT)
      const client = new OpenAI({
        baseURL: options.baseURL,
        apiKey: options.apiKey,
        fetch: http.fetch,
        maxRetries: 0,
        timeout: Duration.toMillis(timeout) + 5_000,
        logLevel: "off",
      })

      const complete = Effect.fn("AiGateway.complete")(function*(request: AiCompletion) {
        const completion = yield* Effect.tryPromise({
          try: (signal) =>
            client.chat.completions.create(
              {
                model: options.model,
                messages: [{ role: "system", content: request.system }, ...request.messages.map((m) => ({ role: m.role, content: m.content }))],
              },
              { signal },
            ),
          catch: toProviderError,
        }).pipe(Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.fail(failed("timeout")) }))
        const text = completion?.choices?.[0]?.message?.content
        if (typeof text !== "string" || text.trim() === "") return yield* failed("empty answer")
        return text.trim()
      })

      return AiGateway.of({ complete })
    }),
  )
