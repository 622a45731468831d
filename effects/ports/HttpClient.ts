/**
 * Outgoing HTTP for every provider adapter. Adapters never call the global `fetch` directly:
 * msw does not intercept it under Deno, and tests hand in a fetch built on msw handlers.
 *
 * Every call is bounded (DECISIONS.md "Hostile input"): one deadline covers DNS lookup, connect,
 * sending the request and reading the whole response, and at most 1 MiB of a response body is
 * read, so a slow, silent or endless provider costs bounded time and memory. The bounds live in
 * the fetch this port hands out (`boundedFetch`), so the adapters and the libraries given that
 * fetch (the openai client, jose's JWKS fetch) get them without doing anything; `request` adds
 * a caller's own, shorter deadline over a whole call and reads the body as text.
 */
import { Context, Data, Duration, Effect, Layer } from "effect"

/**
 * The longest any provider call may take, whatever the caller asks: a ceiling above every
 * adapter's own deadline (AI 30 s, payment 15 s, SMS 10 s), for callers that set none.
 */
export const HTTP_DEADLINE: Duration.Input = "60 seconds"
/** The most of a response body ever read. */
export const MAX_RESPONSE_BYTES = 1024 * 1024

/** The deadline passed before the response was complete. */
export class HttpDeadlineExceeded extends Data.TaggedError("HttpDeadlineExceeded")<{ readonly message: string }> {}
/** The response body is larger than MAX_RESPONSE_BYTES (or the caller's limit). */
export class HttpResponseTooLarge extends Data.TaggedError("HttpResponseTooLarge")<{ readonly message: string }> {}

export interface HttpLimits {
  readonly deadline: Duration.Input
  readonly maxResponseBytes: number
}

const DEFAULT_LIMITS: HttpLimits = { deadline: HTTP_DEADLINE, maxResponseBytes: MAX_RESPONSE_BYTES }

/**
 * `inner` with the limits: the deadline runs from the call until the body is read to its end
 * (or cancelled); it aborts the underlying request and also settles a fetch that ignores its
 * signal (a lookup stuck in the resolver). A body past the limit fails the read and cancels the
 * rest. The caller's own `signal` still works. This is the promise world libraries expect, so
 * its timer is a plain one; Effect callers put their own deadline around it (`request`).
 */
export const boundedFetch = (inner: typeof globalThis.fetch, limits: HttpLimits = DEFAULT_LIMITS): typeof globalThis.fetch =>
(input, init) => {
  const deadlineMs = Duration.toMillis(Duration.fromInputUnsafe(limits.deadline))
  const controller = new AbortController()
  const callerSignal = init?.signal ?? (input instanceof Request ? input.signal : undefined)
  let failedWith: unknown = undefined
  let rejectPending: (e: unknown) => void = () => {}
  let bodyReader: ReadableStreamDefaultReader<Uint8Array> | undefined
  const abort = (reason: unknown) => {
    failedWith ??= reason
    controller.abort(reason)
    rejectPending(reason)
    // A read waiting on a silent server ends now (it would with undici anyway; not every fetch does).
    void bodyReader?.cancel(reason).catch(() => {})
  }
  const timer = setTimeout(() => abort(new HttpDeadlineExceeded({ message: `no complete answer within ${deadlineMs / 1000} s` })), deadlineMs)
  // A body nobody reads must not keep a stopping process alive until the deadline.
  ;(timer as { unref?: () => void }).unref?.()
  const onCallerAbort = () => abort(callerSignal?.reason)
  const done = () => {
    clearTimeout(timer)
    callerSignal?.removeEventListener("abort", onCallerAbort)
  }
  const settled = new Promise<never>((_, reject) => (rejectPending = reject))
  settled.catch(() => {})
  callerSignal?.addEventListener("abort", onCallerAbort, { once: true })
  if (callerSignal?.aborted) onCallerAbort()

  return Promise.race([inner(input, { ...init, signal: controller.signal }), settled]).then(
    (res) => {
      // Announced too large: the status stands, the body fails at once without being read.
      const declared = Number(res.headers.get("content-length") ?? "0")
      if (declared > limits.maxResponseBytes) {
        done()
        void res.body?.cancel().catch(() => {})
        const refused = new HttpResponseTooLarge({ message: `the response declares ${declared} bytes, more than ${limits.maxResponseBytes}` })
        const body = new ReadableStream<Uint8Array>({ pull: (stream) => stream.error(refused) })
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
      }
      // Nothing to read (HEAD, 204, 304): the answer is complete.
      if (res.body === null || res.status === 204 || res.status === 205 || res.status === 304) {
        done()
        return res
      }
      const reader = (bodyReader = res.body.getReader())
      let read = 0
      const body = new ReadableStream<Uint8Array>({
        pull: async (stream) => {
          const chunk = await reader.read().catch((e: unknown) => {
            done()
            throw failedWith ?? e
          })
          if (failedWith !== undefined) {
            done()
            throw failedWith
          }
          if (chunk.done) {
            done()
            return stream.close()
          }
          read += chunk.value.byteLength
          if (read > limits.maxResponseBytes) {
            done()
            void reader.cancel().catch(() => {})
            throw new HttpResponseTooLarge({ message: `the response is larger than ${limits.maxResponseBytes} bytes` })
          }
          stream.enqueue(chunk.value)
        },
        cancel: (reason) => {
          done()
          return reader.cancel(reason)
        },
      })
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
    },
    (e: unknown) => {
      done()
      throw failedWith ?? e
    },
  )
}

export interface HttpClientShape {
  readonly fetch: typeof globalThis.fetch
}

export class HttpClient extends Context.Service<HttpClient, HttpClientShape>()("app/HttpClient") {
  /** A client over `fetch` (the runtime's own, or a test's) with the limits applied. */
  static readonly make = (fetch: typeof globalThis.fetch, limits: HttpLimits = DEFAULT_LIMITS): HttpClientShape =>
    HttpClient.of({ fetch: boundedFetch(fetch, limits) })
  /** The live client: the runtime's own fetch, bounded. */
  static readonly layer = Layer.succeed(HttpClient, HttpClient.make((input, init) => globalThis.fetch(input, init)))
}

/** A whole call, as `request` answers it: status, headers and the body as text. */
export interface HttpAnswer {
  readonly status: number
  readonly ok: boolean
  readonly headers: Headers
  /** The body, or as much of it as MAX_RESPONSE_BYTES and the deadline allowed. */
  readonly text: string
  /** False when the body was cut short (too large, or still arriving at the deadline). */
  readonly complete: boolean
}

/** Why a call has no answer; `detail` is for the log (never the provider's words to a user). */
export class HttpCallFailed extends Data.TaggedError("HttpCallFailed")<{
  readonly reason: "timeout" | "connection"
  readonly detail: string
}> {}

/** Reads `res` as text up to `max` bytes; a body cut short or failing mid-way gives what arrived. */
const readCapped = async (res: Response, max: number): Promise<{ text: string; complete: boolean }> => {
  if (res.body === null) return { text: "", complete: true }
  const reader = res.body.getReader()
  const chunks: Array<Uint8Array> = []
  let read = 0
  let complete = true
  for (;;) {
    const chunk = await reader.read().catch(() => undefined)
    if (chunk === undefined) {
      complete = false
      break
    }
    if (chunk.done) break
    const room = max - read
    chunks.push(chunk.value.byteLength > room ? chunk.value.subarray(0, room) : chunk.value)
    read += Math.min(chunk.value.byteLength, room)
    if (read >= max) {
      complete = false
      void reader.cancel().catch(() => {})
      break
    }
  }
  const all = new Uint8Array(read)
  let at = 0
  for (const c of chunks) {
    all.set(c, at)
    at += c.byteLength
  }
  return { text: new TextDecoder().decode(all), complete }
}

/**
 * One call under one deadline (`deadline`, at most HTTP_DEADLINE), from the lookup to the last
 * byte of the body, which is read as text up to MAX_RESPONSE_BYTES. On the Effect clock, and
 * interrupting it aborts the request. A status received before the deadline is an answer even
 * if its body is still arriving (then `complete` is false), as for webhook deliveries.
 */
export const request = Effect.fn("HttpClient.request")(function*(url: string, init: RequestInit, deadline: Duration.Input) {
  const http = yield* HttpClient
  const limit = Duration.min(Duration.fromInputUnsafe(deadline), Duration.fromInputUnsafe(HTTP_DEADLINE))
  let head: HttpAnswer | undefined
  return yield* Effect.tryPromise({
    try: async (signal): Promise<HttpAnswer> => {
      const res = await http.fetch(url, { ...init, signal })
      head = { status: res.status, ok: res.ok, headers: res.headers, text: "", complete: false }
      return { ...head, ...(await readCapped(res, MAX_RESPONSE_BYTES)) }
    },
    catch: (e) =>
      new HttpCallFailed({
        reason: e instanceof HttpDeadlineExceeded ? "timeout" : "connection",
        detail: String((e as { cause?: unknown })?.cause ?? e).slice(0, 300),
      }),
  }).pipe(
    Effect.timeoutOrElse({
      duration: limit,
      orElse: () =>
        head !== undefined
          ? Effect.succeed(head)
          : Effect.fail(new HttpCallFailed({ reason: "timeout", detail: `no answer within ${Duration.format(limit)}` })),
    }),
  )
})
