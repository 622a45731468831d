/**
 * The order a prepare thread (./prepare-worker.ts) runs its jobs in: a few at a time, in arrival
 * order, not all at once. Authentication and parsing are streams with many asynchronous steps, so
 * jobs started together share the thread and all finish late: under 200 sessions the median job
 * waited behind ~25 others and took 15–20 ms (bench/REPORT.md, MX ingest). In order, each waits
 * only for the ones before it, and prepared messages reach the writer one after another, so it
 * commits the first ones while the thread works on the rest (effects/ingest/writer.ts).
 *
 * A job that waits outside the thread (a DNS answer from the main thread) lends its slot until the
 * answer comes: a sender whose name servers never answer holds its own message, up to the
 * authentication timeout, never the thread.
 */
export interface JobQueue<J> {
  readonly add: (job: J) => void
  /** A running job starts waiting outside the thread; call what it returns when the wait ends. */
  readonly park: () => () => void
  /** Jobs started and not finished, and jobs not started yet (for tests). */
  readonly state: () => { readonly running: number; readonly parked: number; readonly waiting: number }
}

export const jobQueue = <J>(max: number, start: (job: J) => Promise<unknown>): JobQueue<J> => {
  let running = 0
  let parked = 0
  const waiting: Array<J> = []
  const fill = () => {
    while (waiting.length > 0 && running - parked < max) {
      const job = waiting.shift()!
      running++
      const next = () => {
        running--
        fill()
      }
      // A job's own failure is its caller's to report; here it only frees the slot.
      start(job).then(next, next)
    }
  }
  return {
    add: (job) => {
      waiting.push(job)
      fill()
    },
    park: () => {
      parked++
      fill()
      let back = false
      return () => {
        if (back) return
        back = true
        parked--
      }
    },
    state: () => ({ running, parked, waiting: waiting.length }),
  }
}
