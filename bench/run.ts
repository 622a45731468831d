/**
 * `npm run bench -- <name>` runs bench/<name>.ts; with no name, lists them (helpers `*-peer.ts`, `*-support.ts` are not benchmarks).
 * BENCH_ENTRY: the service's entry, from the checkout's root (default: dist/src/main.js, built first, as `npm start` runs it).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const dir = path.dirname(fileURLToPath(import.meta.url))
const name = process.argv[2]
const available = fs.readdirSync(dir).filter((f) => f.endsWith(".ts") && f !== "run.ts" && !/-(peer|support)\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, ""))
if (!name || !available.includes(name)) {
  console.log(`usage: npm run bench -- <${available.join("|")}>`)
  process.exit(name ? 2 : 0)
}
// The service as `npm start` runs it (compiled to dist/ by build.mjs), unless BENCH_ENTRY names
// another entry (say src/main.ts, the sources under Node's type stripping).
if (!process.env.BENCH_ENTRY) {
  execFileSync(process.execPath, [path.join(dir, "..", "build.mjs")], { stdio: "inherit" })
  process.env.BENCH_ENTRY = "dist/src/main.js"
}
await import(path.join(dir, `${name}.ts`))
