/**
 * A fake SMS provider on msw handlers, speaking the contract of DECISIONS.md ("Providers": POST
 * SMS_API_URL, JSON {to, message, sender_id}, Bearer key, 2xx = sent, optional {message_id}).
 * Its fetch goes into the app as the HttpClient (no global interception, so real sockets such as
 * webhook receivers are untouched); requests to other hosts pass through to the real fetch.
 */
import { Layer, Option } from "effect"
import { getResponse, http, HttpResponse } from "msw"
import { HttpClient } from "../../effects/ports/HttpClient.ts"

export const SMS_API_URL = "https://sms.provider.test/v1/messages"

export interface SmsRequest {
  readonly authorization: string | null
  readonly contentType: string | null
  readonly body: { readonly to: string; readonly message: string; readonly sender_id: string }
}

export type SmsAnswer = { readonly status: number; readonly body?: unknown }

export interface SmsProvider {
  readonly requests: Array<SmsRequest>
  /** How the next requests are answered (the last entry repeats); default 200 with a message_id. */
  readonly behave: (...answers: Array<SmsAnswer>) => void
  /** Infrastructure for `makeTestApp`. */
  readonly layer: Layer.Layer<HttpClient>
  /** Settings that point the app at this provider. */
  readonly settings: { readonly smsApiUrl: Option.Option<string> }
  readonly waitFor: (n: number, timeoutMs?: number) => Promise<Array<SmsRequest>>
}

export const makeSmsProvider = (): SmsProvider => {
  const requests: Array<SmsRequest> = []
  let answers: Array<SmsAnswer> = []
  const handlers = [
    http.post(SMS_API_URL, async ({ request }) => {
      requests.push({
        authorization: request.headers.get("authorization"),
        contentType: request.headers.get("content-type"),
        body: await request.json() as SmsRequest["body"],
      })
      const a = answers.length > 1 ? answers.shift()! : answers[0] ?? { status: 200, body: { message_id: `msg-${requests.length}` } }
      return HttpResponse.json(a.body ?? {}, { status: a.status })
    }),
  ]
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const request = new Request(input, init)
    const mocked = await getResponse(handlers, request.clone())
    return mocked ?? globalThis.fetch(request)
  }
  return {
    requests,
    behave: (...a) => {
      answers = a
    },
    layer: Layer.succeed(HttpClient, HttpClient.of({ fetch })),
    settings: { smsApiUrl: Option.some(SMS_API_URL) },
    waitFor: async (n, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`SMS provider got ${requests.length} of ${n} requests`)
        await new Promise((r) => setTimeout(r, 25))
      }
      return requests.slice(0, n)
    },
  }
}
