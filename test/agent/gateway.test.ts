/**
 * The live AiGateway adapter (openai client, fetch from HttpClient) against a fake
 * OpenAI-compatible gateway on msw: the request it sends, and every way an answer can go wrong.
 * Timeouts run on TestClock: no sleeping.
 */
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AiGateway } from "../../effects/ports/AiGateway.ts"
import { openAiGateway } from "../../src/providers/ai-openai.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { AI_API_KEY, AI_BASE_URL, AI_MODEL, makeFakeAi } from "./support.ts"

const ai = makeFakeAi()
let api: TestApp
let bare: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false, settings: ai.settings, infrastructure: ai.layer })
  bare = await makeTestApp({ workers: false })
})
afterAll(async () => {
  await api?.stop()
  await bare?.stop()
})

const request = { system: "You are a test persona.", messages: [{ role: "user", content: "Subject: Hi\n\nAre you open?" }] } as const

const complete = (app: TestApp = api) => app.run(Effect.result(AiGateway.use((g) => g.complete(request))))

describe("the live adapter", () => {
  it("sends model, key, system prompt and the conversation to {AI_BASE_URL}/chat/completions", async () => {
    ai.behave()
    const before = ai.requests.length
    const result = await complete()
    expect(result).toMatchObject({ _tag: "Success" })
    expect((result as { success: string }).success).toMatch(/^Habari Neema,\n\nThank you for your message\./)
    const sent = ai.requests[before]!
    expect(sent.url).toBe(`${AI_BASE_URL}/chat/completions`)
    expect(sent.authorization).toBe(`Bearer ${AI_API_KEY}`)
    expect(sent.body.model).toBe(AI_MODEL)
    expect(sent.body.messages).toEqual([
      { role: "system", content: "You are a test persona." },
      { role: "user", content: "Subject: Hi\n\nAre you open?" },
    ])
  })

  it.each([
    ["server error", { status: 500, fixture: "server-error" }, "HTTP 500"],
    ["rate limit", { status: 429, fixture: "rate-limited" }, "HTTP 429"],
    ["bad key", { status: 401, fixture: "invalid-key" }, "HTTP 401"],
    ["empty choices", { status: 200, fixture: "empty-choices" }, "empty answer"],
    ["null content (content filter)", { status: 200, fixture: "empty-content" }, "empty answer"],
    ["a refused connection", { network: true }, "connection error"],
  ] as const)("turns %s into a ProviderError without the provider's text", async (_, answer, detail) => {
    ai.behave(answer)
    const before = ai.requests.length
    const result = await complete()
    ai.behave()
    // The client's own retries are off: the worker retries durably.
    expect(ai.requests.length - before).toBe(1)
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "ProviderError", message: "the AI gateway did not answer", detail } })
    const shown = JSON.stringify(result)
    expect(shown).not.toMatch(/sk-|trace id|Rate limit reached|Incorrect API key/)
  })

  it("gives up after its timeout on the Effect clock and aborts the request", async () => {
    ai.behave({ hang: true })
    const before = ai.requests.length
    const abortedBefore = ai.aborted.length
    const result = await api.run(Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(Effect.result(AiGateway.use((g) => g.complete(request))))
      yield* Effect.promise(() => ai.waitFor(before + 1))
      yield* TestClock.adjust("29 seconds")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust("1 second")
      return yield* Fiber.join(fiber)
    }).pipe(Effect.provide(TestClock.layer())))
    ai.behave()
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "ProviderError", detail: "timeout" } })
    expect(ai.aborted.length - abortedBefore).toBe(1)
  })

  it("takes a shorter timeout when given one", async () => {
    ai.behave({ hang: true })
    const before = ai.requests.length
    const short = openAiGateway({ baseURL: AI_BASE_URL, apiKey: AI_API_KEY, model: AI_MODEL, timeout: "2 seconds" })
    const result = await api.run(Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(Effect.result(AiGateway.use((g) => g.complete(request))))
      yield* Effect.promise(() => ai.waitFor(before + 1))
      yield* TestClock.adjust("2 seconds")
      return yield* Fiber.join(fiber)
    }).pipe(Effect.provide(Layer.merge(short, TestClock.layer()))))
    ai.behave()
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "ProviderError", detail: "timeout" } })
  })
})

describe("without AI_BASE_URL and AI_API_KEY", () => {
  it("fails NOT_CONFIGURED and calls nobody", async () => {
    const before = ai.requests.length
    const result = await complete(bare)
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "NotConfigured" } })
    expect(ai.requests.length).toBe(before)
  })
})
