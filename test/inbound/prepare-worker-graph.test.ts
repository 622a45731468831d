/**
 * The prepare worker thread (src/ingest/prepare-worker.ts) loads only what preparing a message
 * needs. Each thread is a V8 isolate of its own that loads its modules again: `effect` there cost
 * ~32 MiB of resident memory per thread (bench/REPORT.md, MX ingest). This fails when a change
 * to the prepare code's imports pulls `effect` (or the service's runtime) into the thread.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const root = path.join(path.dirname(new URL(import.meta.url).pathname), "../..")

/** Resolves the worker's module graph in a fresh Node process and lists every module it loads. */
const workerGraph = async (): Promise<Array<string>> => {
  const script = `
    import { registerHooks } from "node:module"
    const seen = []
    registerHooks({ resolve(s, c, next) { const r = next(s, c); seen.push(r.url); return r } })
    const { prepareMessage } = await import(${JSON.stringify(path.join(root, "effects/ingest/prepare.ts"))})
    if (typeof prepareMessage !== "function") throw new Error("prepareMessage missing")
    process.stdout.write(JSON.stringify(seen))
  `
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { cwd: root })
  return JSON.parse(stdout) as Array<string>
}

describe("the prepare worker's module graph", () => {
  it("holds mailauth and mailparser but not effect", async () => {
    const urls = await workerGraph()
    expect(urls.some((u) => u.includes("/node_modules/mailparser/"))).toBe(true)
    expect(urls.some((u) => u.includes("/node_modules/mailauth/"))).toBe(true)
    expect(urls.filter((u) => /\/node_modules\/effect\//.test(u))).toEqual([])
    expect(urls.filter((u) => u.includes("/src/runtime.ts") || u.includes("/effects/ports/"))).toEqual([])
  }, 30_000)
})
