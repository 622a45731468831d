/**
 * What `npm start` runs: the service compiled to JavaScript by build.mjs (dist/). Every script a
 * thread or child process is started from must be in the build as .js (src/module-url.ts), the
 * migrations beside the compiled migrator, and the built entry must start on a fresh DATA_DIR
 * (initdb and the certificate in child processes, PGlite on its thread) and stop cleanly.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort } from "../support/free-port.ts"

const root = path.resolve(import.meta.dirname, "../..")
let out: string
let child: ChildProcess | undefined

beforeAll(() => {
  if (process.env.TEST_DATABASE_URL) return
  // Inside the checkout, so the built modules find node_modules as dist/ does.
  out = fs.mkdtempSync(path.join(root, ".build-test-"))
  execFileSync(process.execPath, [path.join(root, "build.mjs"), out], { stdio: "pipe" })
}, 120_000)
afterAll(() => {
  child?.kill("SIGKILL")
  if (out) fs.rmSync(out, { recursive: true, force: true })
})

/** Source files under `dir` (relative to the root). */
const sources = (dir: string): Array<string> =>
  fs.readdirSync(path.join(root, dir), { recursive: true, encoding: "utf8" }).map((f) => path.join(dir, f)).filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))

// Nothing here depends on the database engine (the built entry starts on embedded PGlite): run
// once, in the PGlite pass.
describe.skipIf(process.env.TEST_DATABASE_URL)("the build (build.mjs)", () => {
  it("compiles every source module, and holds each script a thread or child process starts from", () => {
    for (const f of [...sources("src"), ...sources("effects")]) expect(fs.existsSync(path.join(out, f.replace(/\.ts$/, ".js"))), f).toBe(true)
    const started = sources("src").flatMap((f) =>
      [...fs.readFileSync(path.join(root, f), "utf8").matchAll(/siblingModule\("\.\/([\w-]+)\.ts"/g)].map((m) => path.join(path.dirname(f), `${m[1]}.js`))
    )
    expect(started.length).toBeGreaterThanOrEqual(5)
    for (const f of started) expect(fs.existsSync(path.join(out, f)), f).toBe(true)
  })

  it("carries the migrations, and none that the sources no longer have", () => {
    const built = fs.readdirSync(path.join(out, "src/db/migrations")).sort()
    expect(built).toEqual(fs.readdirSync(path.join(root, "src/db/migrations")).sort())
  })

  it("starts from the built entry on a fresh DATA_DIR and stops cleanly on SIGTERM", { timeout: 90_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "built-"))
    const [http, smtp, sandbox, smtps] = [await freePort(), await freePort(), await freePort(), await freePort()]
    let output = ""
    child = spawn(process.execPath, [path.join(out, "src/main.js")], {
      env: { ...process.env, PORT: String(http), SMTP_PORT: String(smtp), SANDBOX_SMTP_PORT: String(sandbox), SANDBOX_SMTPS_PORT: String(smtps), DATA_DIR: dataDir },
      stdio: ["ignore", "pipe", "pipe"],
    })
    child.stdout!.on("data", (d) => (output += d))
    child.stderr!.on("data", (d) => (output += d))
    const until = Date.now() + 60_000
    let ready: { data?: { database?: string } } | undefined
    while (!ready && Date.now() < until) {
      ready = await fetch(`http://127.0.0.1:${http}/readyz`).then((r) => (r.ok ? r.json() : undefined), () => undefined)
      if (!ready) await new Promise((r) => setTimeout(r, 100))
    }
    expect(ready?.data?.database, output).toBe("pglite")
    expect(fs.existsSync(path.join(dataDir, "pg", "PG_VERSION"))).toBe(true)
    const exited = new Promise<number | null>((resolve) => child!.on("exit", (code) => resolve(code)))
    child.kill("SIGTERM")
    expect(await exited).toBe(0)
    fs.rmSync(dataDir, { recursive: true, force: true })
  })
})
