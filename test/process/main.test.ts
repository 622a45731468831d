/**
 * The real entry point as a newcomer runs it: starts on the embedded defaults (PGlite in
 * DATA_DIR), answers /healthz and /readyz, and exits 0 on SIGTERM after a graceful stop.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { freePort } from "../support/free-port.ts"

let child: ChildProcess | undefined
afterEach(() => child?.kill("SIGKILL"))

const waitFor = async (url: string, ms: number) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    try {
      const r = await fetch(url)
      if (r.ok) return r
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${url} did not answer within ${ms} ms`)
}

describe("src/main.ts", () => {
  it("starts on the embedded defaults and stops cleanly on SIGTERM", { timeout: 90_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "main-"))
    const [http, smtp, sandbox, smtps] = [await freePort(), await freePort(), await freePort(), await freePort()]
    let output = ""
    child = spawn(process.execPath, ["src/main.ts"], {
      env: { ...process.env, PORT: String(http), SMTP_PORT: String(smtp), SANDBOX_SMTP_PORT: String(sandbox), SANDBOX_SMTPS_PORT: String(smtps), DATA_DIR: dataDir, LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    })
    child.stdout!.on("data", (d) => (output += d))
    child.stderr!.on("data", (d) => (output += d))
    const health = await waitFor(`http://127.0.0.1:${http}/healthz`, 60_000)
    expect((await health.json()).success).toBe(true)
    const ready = await (await waitFor(`http://127.0.0.1:${http}/readyz`, 5_000)).json()
    expect(ready.data.database).toBe("pglite")
    expect(fs.existsSync(path.join(dataDir, "secrets.json"))).toBe(true)
    const exited = new Promise<number | null>((resolve) => child!.on("exit", (code) => resolve(code)))
    child.kill("SIGTERM")
    expect(await exited).toBe(0)
    expect(output).toContain("shutting down")
    // Every log line is one JSON object.
    for (const line of output.trim().split("\n")) expect(() => JSON.parse(line)).not.toThrow()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  it("refuses a bad setting with one line naming it", async () => {
    child = spawn(process.execPath, ["src/main.ts"], { env: { ...process.env, PORT: "eighty" }, stdio: ["ignore", "pipe", "pipe"] })
    let err = ""
    child.stderr!.on("data", (d) => (err += d))
    const code = await new Promise<number | null>((resolve) => child!.on("exit", resolve))
    expect(code).toBe(1)
    expect(err.trim()).toMatch(/^Invalid setting PORT: /)
    expect(err.trim().split("\n")).toHaveLength(1)
  })
})
