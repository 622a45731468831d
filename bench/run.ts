/** `npm run bench -- <name>` runs bench/<name>.ts; with no name, lists them (helpers `*-peer.ts`, `*-support.ts` are not benchmarks). */
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
await import(path.join(dir, `${name}.ts`))
