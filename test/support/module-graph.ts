/**
 * The modules a fresh Node process resolves while it imports `files` (paths from the checkout's
 * root), in order: what an isolate that loads them holds in memory. The graph tests
 * (test/process/start-graph.test.ts, test/inbound/prepare-worker-graph.test.ts) read it.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { promisify } from "node:util"

const root = path.join(path.dirname(new URL(import.meta.url).pathname), "../..")

export const moduleGraph = async (files: ReadonlyArray<string>): Promise<Array<string>> => {
  const script = `
    import { registerHooks } from "node:module"
    const seen = []
    registerHooks({ resolve(s, c, next) { const r = next(s, c); seen.push(r.url); return r } })
    for (const file of ${JSON.stringify(files.map((f) => path.join(root, f)))}) await import(file)
    process.stdout.write(JSON.stringify(seen))
  `
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { cwd: root })
  return JSON.parse(stdout) as Array<string>
}
