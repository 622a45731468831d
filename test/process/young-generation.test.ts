/** The young generation src/process.ts re-executes with, by engine (why: see there and bench/REPORT.md). */
import { describe, expect, it } from "vitest"
import { youngGenerationFlags } from "../../src/process.ts"

describe("youngGenerationFlags", () => {
  it("keeps PGlite lean and gives a PostgreSQL deployment room for the requests in flight", () => {
    expect(youngGenerationFlags(undefined)).toEqual(["--max-semi-space-size=4"])
    expect(youngGenerationFlags("")).toEqual(["--max-semi-space-size=4"])
    expect(youngGenerationFlags("postgres://db.internal/mail")).toEqual(["--max-semi-space-size=32"])
  })
})
