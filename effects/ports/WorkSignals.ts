/**
 * In-process nudges for queue workers. The durable queue is the database; a signal only says
 * "there may be new rows, look now" so a freshly stored message is delivered without waiting
 * for the next poll. Losing a signal is harmless: the poll finds the row anyway.
 */
import { Context, Effect, Layer, Queue } from "effect"

export interface WorkSignalsShape {
  /** Wakes the worker of `queue` (non-blocking, coalesced). */
  readonly notify: (queue: string) => Effect.Effect<void>
  /** Waits for a wake-up of `queue`. */
  readonly wait: (queue: string) => Effect.Effect<void>
}

export class WorkSignals extends Context.Service<WorkSignals, WorkSignalsShape>()("app/WorkSignals") {
  static readonly layer = Layer.effect(
    WorkSignals,
    Effect.sync(() => {
      const queues = new Map<string, Queue.Queue<void>>()
      const of = (name: string) =>
        Effect.gen(function*() {
          const existing = queues.get(name)
          if (existing) return existing
          // Capacity 1 with dropping: many notifications between two polls collapse into one.
          const q = yield* Queue.dropping<void>(1)
          queues.set(name, q)
          return q
        })
      return WorkSignals.of({
        notify: (name) => Effect.flatMap(of(name), (q) => Queue.offer(q, undefined)).pipe(Effect.asVoid),
        wait: (name) => Effect.flatMap(of(name), Queue.take),
      })
    }),
  )
}
