/**
 * An envelope whose `data` array arrives in groups (`Reply.more`): written as the client reads,
 * one group fetched only once the one before it was taken, so a page of large messages is never
 * held whole (effects/shared/heavy-pages.ts). The bytes are those `envelope` would give for the
 * whole array, in the same key order. A group that fails after the status line went out cannot
 * become an error answer: the body is cut off (the client sees a truncated response) and the
 * failure is logged.
 */
import { Effect, Exit } from "effect"
import type { Pagination } from "../../effects/shared/schema.ts"
import type { AppRuntime, AppServices } from "../layers.ts"

export interface StreamedPage {
  readonly message?: string
  readonly data: ReadonlyArray<unknown>
  readonly more: ReadonlyArray<Effect.Effect<ReadonlyArray<unknown>, unknown, AppServices>>
  readonly pagination?: Pagination | null
}

export const streamedEnvelope = (runtime: AppRuntime, requestId: string, page: StreamedPage, now: Date = new Date()): ReadableStream<Uint8Array> => {
  const encoder = new TextEncoder()
  const head = `{"success":true,${page.message !== undefined ? `"message":${JSON.stringify(page.message)},` : ""}"data":[`
  const tail = `]${page.pagination !== undefined ? `,"pagination":${JSON.stringify(page.pagination)}` : ""},"request_id":${
    JSON.stringify(requestId)
  },"timestamp":"${now.toISOString()}"}`
  let written = 0
  const items = (list: ReadonlyArray<unknown>) => {
    let out = ""
    for (const item of list) out += (written++ > 0 ? "," : "") + JSON.stringify(item)
    return out
  }
  let next = 0
  return new ReadableStream<Uint8Array>({
    start: (controller) => controller.enqueue(encoder.encode(head + items(page.data))),
    pull: async (controller) => {
      if (next >= page.more.length) {
        controller.enqueue(encoder.encode(tail))
        return controller.close()
      }
      const exit = await runtime.runPromiseExit(page.more[next++]!)
      if (Exit.isSuccess(exit)) return controller.enqueue(encoder.encode(items(exit.value)))
      runtime.runFork(Effect.logError("a streamed answer was cut off", exit.cause).pipe(Effect.annotateLogs({ request_id: requestId })))
      controller.error(new Error("the answer could not be completed"))
    },
    // The client went away: nothing more is fetched.
    cancel: () => {
      next = page.more.length
    },
  }, { highWaterMark: 0 })
}
