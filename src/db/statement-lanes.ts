/**
 * Lanes for statements outside transactions (./postgres.ts): a few connections that each take
 * many statements at once and answer them in order (pipelining). Which lane takes a statement:
 *
 * - the one with the fewest statements in flight, among those that may take one;
 * - a lane may not while its oldest statement has been running `stallMs` or longer: everything
 *   behind a slow statement (a deep listing, a lock wait) waits for it, so a stalled lane takes
 *   nothing new until it moves again;
 * - nor while it holds `depth` statements.
 *
 * When no lane may, `run` returns undefined and the caller runs the statement elsewhere (the pool,
 * one statement per connection): a slow statement delays at most what reached its lane before it
 * was seen to stall.
 */

export interface LaneOptions {
  /** A lane whose oldest statement has run this long takes nothing new (ms). */
  readonly stallMs?: number
  /** Statements one lane holds at most. */
  readonly depth?: number
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

interface Lane<A> {
  readonly run: (text: string, params?: ReadonlyArray<unknown>) => Promise<A>
  /** When each statement in flight started, oldest first (a connection answers in order). */
  starts: Array<number>
  head: number
}

export const statementLanes = <A>(
  runners: ReadonlyArray<(text: string, params?: ReadonlyArray<unknown>) => Promise<A>>,
  options: LaneOptions = {},
): Lanes<A> => {
  const stallMs = options.stallMs ?? STALL_MS
  const depth = options.depth ?? DEPTH
  const now = options.now ?? (() => performance.now())
  const lanes: Array<Lane<A>> = runners.map((run) => ({ run, starts: [], head: 0 }))
  const count = (l: Lane<A>) => l.starts.length - l.head

  const finished = (l: Lane<A>) => {
    l.head++
    if (l.head === l.starts.length) {
      l.starts = []
      l.head = 0
    } else if (l.head >= 1024 && l.head * 2 >= l.starts.length) {
      // A lane under steady load may never drain: drop what is done now and then.
      l.starts = l.starts.slice(l.head)
      l.head = 0
    }
  }

  return {
    run: (text, params) => {
      if (lanes.length === 0) return undefined
      const t = now()
      let best: Lane<A> | undefined
      for (const l of lanes) {
        const n = count(l)
        if (n >= depth || (n > 0 && t - l.starts[l.head]! >= stallMs)) continue
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
