/**
 * Request bodies, read only once the caller is known and the route takes one, and never past
 * MAX_BODY_BYTES.
 *
 * Before, every body a route could take was read first (up to 30 MiB in memory) and the caller
 * authenticated after, and hono's body limit buffered a body without Content-Length before any
 * route ran: anyone could make the process hold 30 MiB per open request without an account. A
 * declared Content-Length over the limit is refused from its headers (`tooLarge`); a body without
 * one is counted while it arrives and given up the moment it passes the limit.
 *
 * Bodies held at once are bounded too (`bodyBudget`): one MAX_BODY_BYTES body was bounded, but an
 * authenticated caller could still send many at once (rate limits apply once the body is parsed),
 * and each is held, parsed and decoded while its request runs.
 */
import { Effect, Semaphore } from "effect"
import { PayloadTooLarge } from "../../effects/errors.ts"

const declared = (headers: Headers): number | undefined => {
  const length = headers.get("content-length")
  return length !== null && !headers.has("transfer-encoding") ? Number(length) : undefined
}

/** The request declares a body longer than `max` bytes: answered 413 before anything is read. */
export const tooLarge = (headers: Headers, max: number): boolean => (declared(headers) ?? 0) > max

/** A body of unknown length, as UTF-8 text (as `Request.text()` decodes it), or undefined once it passes `max` bytes. */
const counted = async (body: ReadableStream<Uint8Array>, max: number): Promise<string | undefined> => {
  const reader = body.getReader()
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > max) {
      await reader.cancel().catch(() => undefined)
      return undefined
    }
    chunks.push(value)
  }
  return new TextDecoder().decode(Buffer.concat(chunks, size))
}

/**
 * The body as text. A declared length was checked against `max` already (`tooLarge`), so such a
 * body is read as is; a rejected read (the client went away) is a defect of this request only.
 */
export const readBody = (request: Request, max: number): Effect.Effect<string, PayloadTooLarge> =>
  Effect.flatMap(
    Effect.promise(() => (request.body === null ? Promise.resolve("") : declared(request.headers) !== undefined ? request.text() : counted(request.body, max))),
    (text) => (text === undefined ? Effect.fail(new PayloadTooLarge({ message: `request body exceeds ${max} bytes` })) : Effect.succeed(text)),
  )

/** Bodies the process holds at once, as a multiple of MAX_BODY_BYTES. */
export const BODY_BUDGET_BODIES = 4

/**
 * Bytes of request bodies held by the requests running at once, at most BODY_BUDGET_BODIES ×
 * `max` (120 MiB with the default 30 MiB). A request that takes a body holds its declared length
 * (`max` when it declares none) from before its body is read until its answer, and one that
 * finds no room waits, its body left unread in the socket (the client is slowed, the process
 * holds nothing for it). Requests without a body never wait.
 */
export const bodyBudget = (max: number) => {
  const bytes = Semaphore.makeUnsafe(BODY_BUDGET_BODIES * max)
  return {
    holding: <A, E, R>(headers: Headers, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      bytes.withPermits(Math.min(max, Math.max(1, declared(headers) ?? max)))(effect),
  }
}

export type BodyBudget = ReturnType<typeof bodyBudget>
