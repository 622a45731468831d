/**
 * The TLS module on its own (src/smtp/tls.ts) and its settings: which certificate is served
 * (files, generated once per DATA_DIR and MX_HOST, none in production), unusable files refused,
 * what start-up and a failed reload say in the log, the session facts recorded at the handshake,
 * and TLS_CERT_FILE / TLS_KEY_FILE / SANDBOX_SMTPS_PORT / NODE_ENV parsing.
 */
import { ConfigProvider, Effect, Exit, Logger, ManagedRuntime, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import nodemailer from "nodemailer"
import { SMTPServer } from "smtp-server"
import type { AddressInfo } from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { loadSettings } from "../../src/config.ts"
import { loadTls, smtpTls, type TlsFacts } from "../../src/smtp/tls.ts"
import { testSettings } from "../support/app.ts"
import { makeCertificate, startTls } from "./tls-client.ts"

const dirs: Array<string> = []
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "tls-unit-"))
  dirs.push(d)
  return d
}
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })))

const withFiles = async (host = "mail.example.co.tz") => {
  const dir = tmp()
  const c = await makeCertificate(host)
  const cert = path.join(dir, "cert.pem")
  const key = path.join(dir, "key.pem")
  fs.writeFileSync(cert, c.cert)
  fs.writeFileSync(key, c.key)
  return { ...c, dir, certFile: cert, keyFile: key, settings: testSettings({ dataDir: dir, tlsCertFile: Option.some(cert), tlsKeyFile: Option.some(key) }) }
}

const failure = async (effect: Effect.Effect<unknown, { message: string }>) => {
  const exit = await Effect.runPromise(Effect.exit(effect))
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  return JSON.stringify(exit.cause)
}

/** A runtime whose log lines are kept, to read what start-up and reloads say. */
const capturingRuntime = () => {
  const lines: Array<string> = []
  const logger = Logger.make((o) => {
    lines.push(`${o.logLevel}: ${Array.isArray(o.message) ? o.message.map(String).join(" ") : String(o.message)}`)
  })
  return { runtime: ManagedRuntime.make(Logger.layer([logger])), lines }
}

describe("which certificate", () => {
  it("the operator's files, when they parse and belong together", async () => {
    const f = await withFiles()
    const loaded = await Effect.runPromise(loadTls(f.settings))
    expect(Option.getOrThrow(loaded)).toMatchObject({ cert: f.cert, key: f.key, source: "files" })
    expect(fs.existsSync(path.join(f.dir, "tls"))).toBe(false)
  })

  it("refuses a key of another certificate, a missing file and garbage, naming the setting", async () => {
    const f = await withFiles()
    const other = await makeCertificate("mail.example.co.tz")
    fs.writeFileSync(f.keyFile, other.key)
    expect(await failure(loadTls(f.settings))).toMatch(/TlsUnavailable.*TLS_CERT_FILE \/ TLS_KEY_FILE/)
    fs.rmSync(f.keyFile)
    expect(await failure(loadTls(f.settings))).toMatch(/TLS_KEY_FILE .*key\.pem cannot be read/)
    fs.writeFileSync(f.keyFile, "not a key")
    fs.writeFileSync(f.certFile, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    expect(await failure(loadTls(f.settings))).toMatch(/TlsUnavailable/)
  })

  it("outside production without files: generated once per DATA_DIR and MX_HOST, also when instances race", async () => {
    const dir = tmp()
    const settings = testSettings({ dataDir: dir })
    const loads = await Promise.all(Array.from({ length: 4 }, () => Effect.runPromise(loadTls(settings))))
    const certs = new Set(loads.map((l) => Option.getOrThrow(l).cert))
    expect(certs.size).toBe(1)
    expect(Option.getOrThrow(loads[0]!).source).toBe("generated")
    const again = Option.getOrThrow(await Effect.runPromise(loadTls(settings)))
    expect(again.cert).toBe([...certs][0])
    const otherHost = Option.getOrThrow(await Effect.runPromise(loadTls(testSettings({ dataDir: dir, mxHost: "mx.other.example" }))))
    expect(otherHost.cert).not.toBe(again.cert)
  })

  it("in production without files: none, and nothing is written", async () => {
    const dir = tmp()
    expect(Option.isNone(await Effect.runPromise(loadTls(testSettings({ dataDir: dir, production: true }))))).toBe(true)
    expect(fs.readdirSync(dir)).toEqual([])
    // With files, production serves them.
    const f = await withFiles()
    expect(Option.isSome(await Effect.runPromise(loadTls({ ...f.settings, production: true })))).toBe(true)
  })
})

describe("a server's TLS", () => {
  it("warns at start-up when production has no certificate, and offers nothing", async () => {
    const { runtime, lines } = capturingRuntime()
    const tls = await smtpTls(runtime, testSettings({ dataDir: tmp(), production: true }), "mx")
    expect(tls.enabled).toBe(false)
    expect(tls.options).toEqual({})
    expect(lines).toContain("Warn: mx: STARTTLS is not offered (NODE_ENV=production and TLS_CERT_FILE / TLS_KEY_FILE are not set)")
    await runtime.dispose()
  })

  it("records {protocol, cipher} of a session that upgraded, null for one that did not", async () => {
    const { runtime } = capturingRuntime()
    const f = await withFiles()
    const tls = await smtpTls(runtime, f.settings, "test")
    const seen: Array<TlsFacts | null> = []
    const server = new SMTPServer({
      ...tls.options,
      authOptional: true,
      logger: false,
      onData(stream, session, callback) {
        stream.resume()
        stream.on("end", () => {
          seen.push(tls.facts(session))
          callback()
        })
      },
      onClose: (session) => tls.forget(session),
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.server.address() as AddressInfo).port
    try {
      const secure = nodemailer.createTransport({ host: "127.0.0.1", port, secure: false, requireTLS: true, tls: { ca: f.cert, servername: "mail.example.co.tz" } })
      await secure.sendMail({ from: "a@example.com", to: "b@example.com", subject: "s", text: "t" })
      const clear = nodemailer.createTransport({ host: "127.0.0.1", port, secure: false, ignoreTLS: true })
      await clear.sendMail({ from: "a@example.com", to: "b@example.com", subject: "s", text: "t" })
      expect(seen[0]).toEqual({ protocol: "TLSv1.3", cipher: expect.stringMatching(/^TLS_(AES|CHACHA20)_/) })
      expect(seen[1]).toBeNull()
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await runtime.dispose()
    }
  })

  it("on SIGHUP serves the re-read files; a broken pair is logged and the current one kept", async () => {
    const { runtime, lines } = capturingRuntime()
    const f = await withFiles()
    const tls = await smtpTls(runtime, f.settings, "test")
    const server = new SMTPServer({ ...tls.options, authOptional: true, logger: false })
    const detach = tls.attach(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.server.address() as AddressInfo).port
    const served = async () => {
      const s = await startTls(port, "mail.example.co.tz")
      s.close()
      return s.certificate.fingerprint256
    }
    const until = async (check: () => boolean | Promise<boolean>) => {
      const deadline = Date.now() + 5000
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`timed out; log: ${lines.join(" | ")}`)
        await new Promise((r) => setTimeout(r, 25))
      }
    }
    try {
      expect(await served()).toBe(f.fingerprint)
      const broken = await makeCertificate("mail.example.co.tz")
      fs.writeFileSync(f.keyFile, broken.key)
      process.kill(process.pid, "SIGHUP")
      await until(() => lines.some((l) => l.startsWith("Error: test: TLS reload failed, keeping the current certificate")))
      expect(await served()).toBe(f.fingerprint)
      fs.writeFileSync(f.certFile, broken.cert)
      process.kill(process.pid, "SIGHUP")
      await until(() => lines.includes("Info: test: TLS certificate reloaded (SIGHUP)"))
      expect(await served()).toBe(broken.fingerprint)
      // Detached: later signals no longer touch this server.
      detach()
      const listeners = process.listenerCount("SIGHUP")
      const third = await makeCertificate("mail.example.co.tz")
      fs.writeFileSync(f.certFile, third.cert)
      fs.writeFileSync(f.keyFile, third.key)
      expect(process.listenerCount("SIGHUP")).toBe(listeners)
    } finally {
      detach()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await runtime.dispose()
    }
  })
})

describe("settings", () => {
  const load = (env: Record<string, string>) => Effect.runPromise(Effect.result(loadSettings(ConfigProvider.fromEnv({ env: { DATA_DIR: tmp(), ...env } }))))

  it("defaults: no files, SMTPS on 2465, not production", async () => {
    const r = await load({})
    expect(r._tag).toBe("Success")
    if (r._tag !== "Success") return
    expect(r.success).toMatchObject({ tlsCertFile: Option.none(), tlsKeyFile: Option.none(), sandboxSmtpsPort: 2465, production: false })
  })

  it("reads TLS_CERT_FILE, TLS_KEY_FILE, SANDBOX_SMTPS_PORT and NODE_ENV", async () => {
    const r = await load({ TLS_CERT_FILE: "/etc/tls/cert.pem", TLS_KEY_FILE: "/etc/tls/key.pem", SANDBOX_SMTPS_PORT: "4650", NODE_ENV: "production",
      // Production fails closed without these (DECISIONS "Production mode").
      JWT_SECRET: "ab".repeat(32), SECRETS_KEY: "cd".repeat(32),
      PAYMENT_PROVIDER: "fake", MAIL_TRANSPORT: "capture", SMS_PROVIDER: "log", PLATFORM_MAIL: "log" })
    expect(r._tag).toBe("Success")
    if (r._tag !== "Success") return
    expect(r.success).toMatchObject({
      tlsCertFile: Option.some("/etc/tls/cert.pem"),
      tlsKeyFile: Option.some("/etc/tls/key.pem"),
      sandboxSmtpsPort: 4650,
      production: true,
    })
    const dev = await load({ NODE_ENV: "development" })
    expect(dev._tag === "Success" && dev.success.production).toBe(false)
  })

  it.each([
    [{ TLS_CERT_FILE: "/etc/tls/cert.pem" }, /TLS_CERT_FILE \/ TLS_KEY_FILE: set both/],
    [{ TLS_KEY_FILE: "/etc/tls/key.pem" }, /TLS_CERT_FILE \/ TLS_KEY_FILE: set both/],
    [{ SANDBOX_SMTPS_PORT: "smtps" }, /SANDBOX_SMTPS_PORT/],
    [{ SANDBOX_SMTPS_PORT: "70000" }, /SANDBOX_SMTPS_PORT/],
  ])("refuses %j with one line naming the setting", async (env, message) => {
    const r = await load(env)
    expect(r._tag).toBe("Failure")
    if (r._tag === "Failure") expect(r.failure.message).toMatch(message)
  })
})
