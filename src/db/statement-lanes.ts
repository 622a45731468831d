/**
 * Lanes for statements outside transactions (./postgres.ts): a few connections that each take
 * many statements at once and answer them in order (pipelining). Which lane takes a statement:
 *
 * - the one with the fewest statements in flight, among those that may take one;
 * - a lane may not while its oldest statement has been running `stallMs` or longer: everything
 *   behind a slow statement (a deep listing, a lock wait) waits for it, so a stalled lane takes
 *   nothing new until it moves again;
 * - nor while it holds `depth` statements, or more than `queueMs` of work at its recent pace (the
 *   time its last statements took each, a moving average): slow statements do not queue.
 *
 * When no lane may, `run` returns undefined and the caller runs the statement elsewhere (the pool,
 * one statement per connection): a slow statement delays at most what reached its lane before it
 * was seen to stall.
 */
import { type Fifo, fifo } from "../../effects/shared/fifo.ts"

export interface LaneOptions {
  /** A lane whose oldest statement has run this long takes nothing new (ms). */
  readonly stallMs?: number
  /** Statements one lane holds at most. */
  readonly depth?: number
  /** A lane takes a statement only while what it holds would take less than this at its recent pace (ms). */
  readonly queueMs?: number
  /** The clock (ms); tests drive it. */
  readonly now?: () => number
}

export interface Lanes<A> {
  /** Runs the statement on a lane, or returns undefined when no lane may take it now. */
  readonly run: (text: string, params?: ReadonlyArray<unknown>) => Promise<A> | undefined
  /** Statements in flight per lane (tests). */
  readonly inFlight: () => ReadonlyArray<number>
}

/**
 * Measured on GET /api/inbound/messages/{id} at 50 connections (bench/REPORT.md, 2026-11-26): a
 * lane holds ~25 statements under that load and its oldest has waited ~3 ms. 10 ms leaves that
 * room and keeps what a slow statement can hold up short.
 */
export const STALL_MS = 10
export const DEPTH = 32
/**
 * Fast statements (a row by key, ~0.1–0.25 ms each under load) fill a lane; slower ones (a
 * listing page, ~0.5 ms and up) take a lane only when it holds few and otherwise run side by side
 * on the pool, where one does not wait behind another. Measured at 50 connections (bench/REPORT.md,
 * 2026-11-26): with 8 ms, listing page 500 of 1,000 ran ~30 % faster than on the pool but its
 * p99 went from 50–80 to 150–325 ms; with 4 ms it stays at 47–72 and a message by id keeps its
 * ~2× (p99 15–17 ms); 2 ms gave up part of the by-id gain.
 */
export const QUEUE_MS = 4
/** How much each finished statement moves a lane's pace. */
const PACE_WEIGHT = 0.2

interface Lane<A> {
  readonly run: (text: string, params?: ReadonlyArray<unknown>) => Promise<A>
  /** When each statement in flight started, oldest first (a connection answers in order). */
  readonly starts: Fifo<number>
  /** The lane's recent time per statement (ms, a moving average; -1 before the first), and when its last one ended. */
  pace: number
  lastDone: number
}

export const statementLanes = <A>(
  runners: ReadonlyArray<(text: string, params?: ReadonlyArray<unknown>) => Promise<A>>,
  options: LaneOptions = {},
): Lanes<A> => {
  const stallMs = options.stallMs ?? STALL_MS
  const depth = options.depth ?? DEPTH
  const now = options.now ?? (() => performance.now())
  const queueMs = options.queueMs ?? QUEUE_MS
  const lanes: Array<Lane<A>> = runners.map((run) => ({ run, starts: fifo<number>(), pace: -1, lastDone: 0 }))
  const count = (l: Lane<A>) => l.starts.size()

  const finished = (l: Lane<A>) => {
    // A statement's own time: from its start, or from the end of the one before it if that was later.
    const t = now()
    const took = t - Math.max(l.starts.shift()!, l.lastDone)
    l.pace = l.pace < 0 ? took : l.pace + PACE_WEIGHT * (took - l.pace)
    l.lastDone = t
  }

  return {
    run: (text, params) => {
      if (lanes.length === 0) return undefined
      const t = now()
      let best: Lane<A> | undefined
      for (const l of lanes) {
        const n = count(l)
        if (n > 0 && (n >= depth || t - l.starts.peek()! >= stallMs || n * l.pace >= queueMs)) continue
        if (!best || n < count(best)) best = l
      }
      if (!best) return undefined
      const lane = best
      lane.starts.push(t)
      // Settles in order on a healthy connection; on a broken one every statement in flight fails,
      // and each failure takes one off the count all the same.
      return lane.run(text, params).finally(() => finished(lane))
    },
    inFlight: () => lanes.map(count),
  }
}
