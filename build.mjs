/**
 * Builds what `npm start` runs: src/ and effects/ compiled to JavaScript in dist/ (or the folder
 * given), with the SQL migrations beside the compiled migrator. The folder is emptied first, so a
 * file removed from the sources (a migration above all) is gone from the build too.
 *
 *   node build.mjs [outDir]
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.dirname(fileURLToPath(import.meta.url))
const out = path.resolve(root, process.argv[2] ?? "dist")
fs.rmSync(out, { recursive: true, force: true })
const tsc = path.join(root, "node_modules", ".bin", "tsc")
execFileSync(tsc, ["-p", path.join(root, "tsconfig.build.json"), "--outDir", out], { stdio: "inherit" })
fs.cpSync(path.join(root, "src/db/migrations"), path.join(out, "src/db/migrations"), { recursive: true })
