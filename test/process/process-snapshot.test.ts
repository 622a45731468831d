/** The /proc snapshot tests print when a child never became ready (test/support/process-snapshot.ts). */
import * as fs from "node:fs"
import { describe, expect, it } from "vitest"
import { processSnapshot } from "../support/process-snapshot.ts"

describe("processSnapshot", () => {
  it.skipIf(!fs.existsSync("/proc/self"))("names the command line, the state and every thread with its wait channel", () => {
    const snapshot = processSnapshot(process.pid)
    expect(snapshot).toContain(`process ${process.pid}: ${process.execPath}`)
    expect(snapshot).toMatch(/State:\s+\S/)
    expect(snapshot).toMatch(/threads (\S+:[A-Z]:\S+ ?)+$/)
  })

  it("is empty for a process that is not there", () => {
    expect(processSnapshot(undefined)).toBe("")
    expect(processSnapshot(2 ** 22 + 1)).toBe("")
  })
})
