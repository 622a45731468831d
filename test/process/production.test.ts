/**
 * Production mode through the real entry (src/main.ts as a subprocess), as an operator meets it:
 * NODE_ENV=production with settings forgotten exits 1 with one line per missing item; with the
 * stand-ins named it starts and says, one line per provider, what runs. The image sets
 * NODE_ENV=production, so a container cannot fall back to the fakes by accident.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { freePort } from "../support/free-port.ts"

let child: ChildProcess | undefined
afterEach(() => child?.kill("SIGKILL"))

/** Only what the test gives: nothing of the developer's own environment leaks in. */
const run = (env: Record<string, string>) => {
  child = spawn(process.execPath, ["src/main.ts"], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  const out = { stdout: "", stderr: "" }
  child.stdout!.on("data", (d) => (out.stdout += d))
  child.stderr!.on("data", (d) => (out.stderr += d))
  const exited = new Promise<number | null>((resolve) => child!.on("exit", (code) => resolve(code)))
  return { out, exited }
}

const KEYS = { JWT_SECRET: "ab".repeat(32), SECRETS_KEY: "cd".repeat(32) }

describe("NODE_ENV=production through src/main.ts", () => {
  it("exits 1 with one line per missing item, before opening anything", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "prod-"))
    const { out, exited } = run({ NODE_ENV: "production", DATA_DIR: dataDir, PORT: String(await freePort()) })
    expect(await exited).toBe(1)
    const lines = out.stderr.trim().split("\n")
    expect(lines.map((l) => l.split(" ")[0])).toEqual(["JWT_SECRET", "SECRETS_KEY", "PAYMENT_API_URL", "SMTP_RELAY_URL", "SMTP_RELAY_URL", "SMS_API_URL"])
    for (const line of lines) expect(line).toMatch(/^[A-Z_]+ is not set: /)
    expect(out.stdout).toBe("")
    // Nothing was generated or opened: no keys file, no database.
    expect(fs.readdirSync(dataDir)).toEqual([])
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  it("exits 1 naming the one item left", async () => {
    const { out, exited } = run({
      NODE_ENV: "production",
      DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), "prod-")),
      ...KEYS,
      PAYMENT_PROVIDER: "fake",
      MAIL_TRANSPORT: "capture",
      PLATFORM_MAIL: "log",
    })
    expect(await exited).toBe(1)
    expect(out.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^SMS_API_URL is not set: .*SMS_PROVIDER=log/)])
  })

  it("starts with the stand-ins named, logs one line per provider, and serves the fake gateway", { timeout: 90_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "prod-"))
    const [http, smtp, sandbox] = [await freePort(), await freePort(), await freePort()]
    const { out, exited } = run({
      NODE_ENV: "production",
      DATA_DIR: dataDir,
      PORT: String(http),
      SMTP_PORT: String(smtp),
      SANDBOX_SMTP_PORT: String(sandbox),
      ...KEYS,
      PAYMENT_PROVIDER: "fake",
      MAIL_TRANSPORT: "capture",
      SMS_PROVIDER: "log",
      PLATFORM_MAIL: "log",
    })
    const until = Date.now() + 60_000
    while (!out.stdout.includes('"provider":"google"') && Date.now() < until) await new Promise((r) => setTimeout(r, 100))
    const logs = out.stdout.trim().split("\n").map((l) => JSON.parse(l) as { message: string; level: string; annotations: Record<string, unknown> })
    const providers = logs.filter((l) => typeof l.annotations?.provider === "string")
    expect(providers.map((l) => [l.annotations.provider, l.annotations.kind, l.level])).toEqual([
      ["payments", "stand-in", "WARN"],
      ["outbound-mail", "stand-in", "WARN"],
      ["platform-mail", "stand-in", "WARN"],
      ["sms", "stand-in", "WARN"],
      ["ai", "not configured", "INFO"],
      ["google", "not configured", "INFO"],
    ])
    expect(String(providers[0]!.message)).toBe("provider payments: fake gateway (anyone can complete a top-up) (stand-in)")
    const page = await fetch(`http://127.0.0.1:${http}/fake-gateway/checkout/fake_000000000000000000000000`)
    // The route exists (the fake is the chosen provider): an unknown payment, not an unknown path.
    expect(page.status).toBe(404)
    expect((await page.json()).message).toBe("no such payment at the fake gateway")
    child!.kill("SIGTERM")
    expect(await exited).toBe(0)
    fs.rmSync(dataDir, { recursive: true, force: true })
  })
})

describe("the Docker image", () => {
  it("runs in production mode", () => {
    const dockerfile = fs.readFileSync(new URL("../../Dockerfile", import.meta.url), "utf8")
    const finalStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "))
    expect(finalStage).toMatch(/^ENV [^\n]*\bNODE_ENV=production\b/m)
  })
})
