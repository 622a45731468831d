/**
 * The AiGateway adapter chosen from the settings: the OpenAI-compatible client (./ai-openai.ts)
 * with AI_BASE_URL and AI_API_KEY, else 503 NOT_CONFIGURED. The client's module is loaded only
 * when it is configured: `openai` is ~240 modules, several MB resident in every process otherwise.
 */
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { AiGateway } from "../../effects/ports/AiGateway.ts"

export const aiGatewayLayer = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isNone(config.aiBaseUrl) || Option.isNone(config.aiApiKey)) return AiGateway.notConfigured
    const { openAiGateway } = yield* Effect.promise(() => import("./ai-openai.ts"))
    return openAiGateway({ baseURL: config.aiBaseUrl.value, apiKey: config.aiApiKey.value, model: config.aiModel })
  }),
)
