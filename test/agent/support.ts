/**
 * Test support for the agent: a fake OpenAI-compatible gateway on msw handlers (its fetch goes
 * into the app as the HttpClient, as the live adapter takes it, so it works without patching the
 * global fetch), a recording OutboundSender, mail stored through the real ingest, and one worker
 * round over chosen addresses.
 */
import { Effect, Layer, Option } from "effect"
import { getResponse, http, HttpResponse } from "msw"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { AgentReplier } from "../../effects/agent/replier.ts"
import type { AgentJobRow } from "../../effects/agent/schema.ts"
import { InsufficientBalance, type ProviderError, type RateLimited } from "../../effects/errors.ts"
import { Ingest } from "../../effects/ingest/service.ts"
import { OutboundSender, type OutboundSenderShape, type SendRequest, type SentMessage } from "../../effects/outbound/contract.ts"
import { Database } from "../../effects/ports/Database.ts"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { agentWorkerSpec } from "../../src/workers/agent.ts"
import { runOnce } from "../../src/workers/worker.ts"
import type { TestApp } from "../support/app.ts"

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

export const AI_BASE_URL = "https://ai.gateway.test/v1"
export const AI_API_KEY = "sk-test-agent-0123456789abcdef"
export const AI_MODEL = "test-model"

export const aiFixture = (name: string): unknown => JSON.parse(fs.readFileSync(path.join(root, "fixtures", "ai", `${name}.json`), "utf8"))
export const mailFixture = (rel: string): Buffer => fs.readFileSync(path.join(root, "fixtures", "mail", rel))

export interface AiRequest {
  readonly url: string
  readonly authorization: string | null
  readonly body: {
    readonly model: string
    readonly messages: ReadonlyArray<{ readonly role: string; readonly content: string }>
  }
}

export type AiAnswer =
  | { readonly status: number; readonly fixture?: string; readonly body?: unknown }
  | { readonly reply: string }
  /** Never answers (until the request is aborted). */
  | { readonly hang: true }
  /** The connection fails. */
  | { readonly network: true }

export interface FakeAi {
  readonly requests: Array<AiRequest>
  readonly aborted: Array<string>
  /** How the next requests are answered (the last entry repeats); default: `reply.json`. */
  readonly behave: (...answers: Array<AiAnswer>) => void
  readonly layer: Layer.Layer<any, never, never>
  readonly settings: { readonly aiBaseUrl: Option.Option<string>; readonly aiApiKey: Option.Option<string>; readonly aiModel: string }
  /** Resolves once `n` requests arrived. */
  readonly waitFor: (n: number, timeoutMs?: number) => Promise<Array<AiRequest>>
}

const completion = (content: string) => {
  const base = aiFixture("reply") as { choices: Array<{ message: Record<string, unknown> }> }
  return { ...base, choices: [{ ...base.choices[0]!, message: { ...base.choices[0]!.message, content } }] }
}

export const makeFakeAi = (): FakeAi => {
  const requests: Array<AiRequest> = []
  const aborted: Array<string> = []
  let answers: Array<AiAnswer> = []
  const handlers = [
    http.post(`${AI_BASE_URL}/chat/completions`, async ({ request }) => {
      requests.push({ url: request.url, authorization: request.headers.get("authorization"), body: await request.json() as AiRequest["body"] })
      const a = answers.length > 1 ? answers.shift()! : answers[0] ?? { status: 200, fixture: "reply" }
      if ("hang" in a) return new Promise<Response>(() => {})
      if ("network" in a) return HttpResponse.error()
      if ("reply" in a) return HttpResponse.json(completion(a.reply))
      return HttpResponse.json((a.fixture ? aiFixture(a.fixture) : a.body ?? {}) as never, { status: a.status })
    }),
  ]
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const request = new Request(input, init)
    const signal = init?.signal ?? undefined
    const abort = new Promise<never>((_, reject) => {
      const fail = () => {
        aborted.push(request.url)
        reject(new DOMException("The operation was aborted.", "AbortError"))
      }
      if (signal?.aborted) fail()
      else signal?.addEventListener("abort", fail, { once: true })
    })
    const mocked = await Promise.race([getResponse(handlers, request.clone()), abort])
    if (mocked?.type === "error") throw new TypeError("fetch failed")
    return mocked ?? globalThis.fetch(request)
  }
  return {
    requests,
    aborted,
    behave: (...a) => {
      answers = a
    },
    layer: Layer.succeed(HttpClient, HttpClient.of({ fetch })) as Layer.Layer<any, never, never>,
    settings: { aiBaseUrl: Option.some(AI_BASE_URL), aiApiKey: Option.some(AI_API_KEY), aiModel: AI_MODEL },
    waitFor: async (n, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`AI gateway got ${requests.length} of ${n} requests`)
        await new Promise((r) => setTimeout(r, 10))
      }
      return requests.slice(0, n)
    },
  }
}

export type SendFailure = InsufficientBalance | RateLimited | ProviderError | Parameters<typeof Effect.fail>[0]

/** An OutboundSender that records every call; answers `sent` unless told otherwise (the last entry repeats). */
export const recordingSender = () => {
  const calls: Array<{ readonly userId: number; readonly request: SendRequest }> = []
  let answers: Array<SentMessage["status"] | { readonly fail: unknown }> = []
  let nextId = 9000
  const send: OutboundSenderShape["send"] = (userId, request) =>
    Effect.suspend(() => {
      calls.push({ userId, request })
      const a = answers.length > 1 ? answers.shift()! : answers[0] ?? "sent"
      if (typeof a === "object") return Effect.fail(a.fail as never)
      return Effect.succeed({ id: ++nextId, status: a, amount_tzs: 5 })
    })
  return {
    calls,
    behave: (...a: typeof answers) => {
      answers = a
    },
    layer: Layer.succeed(OutboundSender, OutboundSender.of({ send })),
  }
}

export const noBalance = () => new InsufficientBalance({ message: "the wallet cannot cover this send", required_tzs: 5, balance_tzs: 0 })

/** Stores a message through the real ingest (parse, headers, MessageEvents) as the MX server does. */
export const deliver = (api: TestApp, raw: string | Uint8Array, options: { readonly to: string; readonly mailFrom?: string }) =>
  api.run(Ingest.use((i) =>
    i.deliver({
      raw: typeof raw === "string" ? Buffer.from(raw, "utf8") : raw,
      mailFrom: options.mailFrom ?? "asha@sender.example",
      recipients: [options.to],
      client: { ip: "127.0.0.1", helo: "sender.example" },
    })
  )).then((ids) => ids[0]!)

/** A plain message with CRLF line ends. */
export const mail = (o: {
  readonly from?: string
  readonly to: string
  readonly subject?: string
  readonly body?: string
  readonly headers?: ReadonlyArray<string>
  readonly messageId?: string
}) =>
  [
    `From: ${o.from ?? "Asha Mushi <asha@sender.example>"}`,
    `To: ${o.to}`,
    `Subject: ${o.subject ?? "Opening hours"}`,
    `Message-ID: ${o.messageId ?? `<m-${Math.random().toString(16).slice(2)}@sender.example>`}`,
    "Date: Sun, 22 Nov 2026 08:00:00 +0300",
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    ...(o.headers ?? []),
    "",
    o.body ?? "Habari, are you open on Saturday?",
    "",
  ].join("\r\n")

/** One worker round over the jobs of these addresses, with this OutboundSender (default: the app's real one). */
export const round = (addressIds: ReadonlyArray<number>, sender?: Layer.Layer<OutboundSender>) =>
  Effect.gen(function*() {
    const spec = yield* agentWorkerSpec()
    return yield* runOnce({
      ...spec,
      claim: (now, limit) => Effect.map(spec.claim(now, limit), (rows) => rows.filter((r) => addressIds.includes(r.address_id))),
    })
  }).pipe(Effect.provide(sender ? AgentReplier.layer.pipe(Layer.provide(sender)) : AgentReplier.layer))

export const jobsOf = (addressId: number) =>
  Database.use((db) => db.query<AgentJobRow>("SELECT * FROM agent_jobs WHERE address_id = $1 ORDER BY id", [addressId]))
