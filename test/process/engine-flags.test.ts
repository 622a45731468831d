/** The V8 flags and malloc settings src/process.ts re-executes with (why: see there and bench/REPORT.md). */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { engineFlags, flagsToAdd, mallocTuning } from "../../src/process.ts"

describe("engineFlags", () => {
  it("keeps PGlite lean (small young generation, WebAssembly never tiered up nor gathering feedback for it, old generation grown by at most 2×) and gives a PostgreSQL deployment room for the requests in flight from the start", () => {
    const pglite = ["--max-semi-space-size=4", "--no-wasm-tier-up", "--no-wasm-dynamic-tiering", "--no-wasm-inlining", "--heap-growing-percent=50"]
    expect(engineFlags(undefined)).toEqual(pglite)
    expect(engineFlags("")).toEqual(pglite)
    expect(engineFlags("postgres://db.internal/mail")).toEqual(["--max-semi-space-size=8", "--min-semi-space-size=8"])
  })

  it("leaves alone a flag the operator gave, in either polarity and spelling", () => {
    expect(flagsToAdd([], undefined)).toEqual(engineFlags(undefined))
    expect(flagsToAdd(["--no-wasm-dynamic-tiering", "--no-wasm-tier-up", "--heap_growing_percent=0"], undefined)).toEqual(["--max-semi-space-size=4", "--no-wasm-inlining"])
    expect(flagsToAdd(["--wasm-inlining"], undefined)).toEqual(["--max-semi-space-size=4", "--no-wasm-tier-up", "--no-wasm-dynamic-tiering", "--heap-growing-percent=50"])
    expect(flagsToAdd(["--max-semi-space-size=8", "src/main.ts", ""], "postgres://db/mail")).toEqual([])
    // The young generation sized by the operator, either bound: the other is not added.
    expect(flagsToAdd(["--max-semi-space-size=4"], "postgres://db/mail")).toEqual([])
    expect(flagsToAdd(["--min-semi-space-size=2"], "postgres://db/mail")).toEqual(["--max-semi-space-size=8"])
    // An operator who turns the optimising tier on keeps its inlining.
    expect(flagsToAdd(["--wasm-tier-up", "--max_semi_space_size=16"], undefined)).toEqual(["--no-wasm-dynamic-tiering", "--heap-growing-percent=50"])
    expect(flagsToAdd(["--wasm_dynamic_tiering"], undefined)).toEqual(["--max-semi-space-size=4", "--no-wasm-tier-up", "--heap-growing-percent=50"])
    expect(flagsToAdd(["--no-wasm-tier-up"], undefined)).toEqual(["--max-semi-space-size=4", "--no-wasm-dynamic-tiering", "--no-wasm-inlining", "--heap-growing-percent=50"])
    // A similar-looking flag is another flag.
    expect(flagsToAdd(["--wasm-tier-up-filter=3"], undefined)).toEqual(engineFlags(undefined))
  })

  it("are flags this Node's V8 knows: a process started with them runs and says nothing about them", async () => {
    for (const url of [undefined, "postgres://db.internal/mail"]) {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [...engineFlags(url), "-e", "process.stdout.write('ok')"])
      expect({ stdout, stderr }).toEqual({ stdout: "ok", stderr: "" })
    }
  })
})

describe("mallocTuning", () => {
  it("keeps buffers up to 4 MiB in malloc's heap and trims it past 256 MiB free, unless the operator said otherwise", () => {
    expect(mallocTuning({})).toEqual({ MALLOC_MMAP_THRESHOLD_: "4194304", MALLOC_TRIM_THRESHOLD_: "268435456" })
    expect(mallocTuning({ MALLOC_MMAP_THRESHOLD_: "65536" })).toEqual({ MALLOC_MMAP_THRESHOLD_: "65536", MALLOC_TRIM_THRESHOLD_: "268435456" })
    expect(mallocTuning({ MALLOC_TRIM_THRESHOLD_: "0" })).toEqual({ MALLOC_MMAP_THRESHOLD_: "4194304", MALLOC_TRIM_THRESHOLD_: "0" })
  })
})
