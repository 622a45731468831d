/**
 * The prepare worker thread (src/ingest/prepare-worker.ts) loads only what preparing a message
 * needs. Each thread is a V8 isolate of its own that loads its modules again: `effect` there cost
 * ~32 MiB of resident memory per thread (bench/REPORT.md, MX ingest). This fails when a change
 * to the prepare code's imports pulls `effect` (or the service's runtime) into the thread.
 */
import { describe, expect, it } from "vitest"
import { moduleGraph } from "../support/module-graph.ts"

/** Every module the worker's code resolves. */
const workerGraph = () => moduleGraph(["effects/ingest/prepare.ts"])

describe("the prepare worker's module graph", () => {
  it("holds mailauth and mailparser but not effect", async () => {
    const urls = await workerGraph()
    expect(urls.some((u) => u.endsWith("/effects/ingest/prepare.ts"))).toBe(true)
    expect(urls.some((u) => u.includes("/node_modules/mailparser/"))).toBe(true)
    expect(urls.some((u) => u.includes("/node_modules/mailauth/"))).toBe(true)
    expect(urls.filter((u) => /\/node_modules\/effect\//.test(u))).toEqual([])
    expect(urls.filter((u) => u.includes("/src/runtime.ts") || u.includes("/effects/ports/"))).toEqual([])
  }, 30_000)
})
