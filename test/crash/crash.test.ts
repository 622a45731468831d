/**
 * Crash trials (issue 10, point 6): ≥ 20 kill -9 of the real process (src/main.ts) at seeded
 * random moments under mixed load, on PostgreSQL, with the invariants of invariants.ts checked
 * after every kill and once more after a final drain. See trials.ts for the procedure and the
 * README ("Crash trials") for longer runs.
 */
import { describe, expect, it } from "vitest"
import { crashOptionsFromEnv } from "./options.ts"

const url = process.env.TEST_DATABASE_URL

// PGlite is embedded in the process being killed, and only one process may open its files:
// the trials need a database server that outlives the service, so they run in the PostgreSQL pass.
const title = url
  ? "crash trials: kill -9 of src/main.ts under mixed load on PostgreSQL"
  : "crash trials (skipped: they need TEST_DATABASE_URL; PGlite lives inside the killed process, so they run in the PostgreSQL pass)"

describe.skipIf(!url)(title, () => {
  const options = url ? crashOptionsFromEnv(url) : undefined
  // Budget: ~8 s per kill at the worst plus set-up and the final drain.
  const timeout = options ? 60_000 + options.kills * 8_000 + options.drainTimeoutMs : 0

  it(
    "keeps money, mail, payments and webhook deliveries consistent across every kill",
    { timeout },
    async () => {
      const { formatReport, runCrashTrials } = await import("./trials.ts")
      const lines: Array<string> = []
      const verbose = process.env.CRASH_VERBOSE === "1"
      const report = await runCrashTrials(options!, (line) => {
        lines.push(line)
        if (verbose) console.log(line)
      })
      const text = formatReport(report)
      console.log(text)
      if (process.env.CRASH_REPORT_FILE) {
        const fs = await import("node:fs")
        fs.writeFileSync(process.env.CRASH_REPORT_FILE, JSON.stringify({ ...report, progress: lines }, null, 2))
      }

      expect(report.violations, text).toEqual([])
      expect(report.kills.length).toBe(options!.kills)
      expect(report.counts).not.toBeNull()
      const c = report.counts!
      // The load really ran: mail was acknowledged, money moved, deliveries were retried and ended.
      expect(c.inboundAcked).toBeGreaterThan(0)
      expect(c.recipientsSent).toBeGreaterThan(0)
      expect(c.topupsCompleted).toBeGreaterThan(0)
      expect(c.deliveries).toBeGreaterThan(0)
      expect(c.deliveriesInFlight).toBe(0)
      expect(c.outboundQueued).toBe(0)
    },
  )
})
