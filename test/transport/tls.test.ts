/**
 * TLS on the SMTP servers over real sockets (DECISIONS.md "TLS on the SMTP servers"): the
 * generated certificate for MX_HOST, made once into DATA_DIR; operator certificate files and
 * their reload on SIGHUP; STARTTLS on the MX and the sandbox, implicit TLS on the sandbox's SMTPS
 * port; nodemailer with `requireTLS`; AUTH without TLS still taken by the sandbox; production
 * without certificate files offering no STARTTLS.
 */
import { Option } from "effect"
import { X509Certificate } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { Database } from "../../effects/ports/Database.ts"
import { generatedFiles } from "../../src/smtp/tls.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress } from "../support/inbound-fixtures.ts"
import { smtpLogin } from "../sandbox/support.ts"
import { features, implicitTls, makeCertificate, plainEhlo, startTls } from "./tls-client.ts"

const MX_HOST = "mx.inbox.localhost"

let api: TestApp
let generatedCert: string
beforeAll(async () => {
  api = await makeTestApp({ workers: false, certificate: "generate" })
  generatedCert = fs.readFileSync(generatedFiles(api.settings.dataDir, MX_HOST).cert, "utf8")
})
afterAll(() => api?.stop())

const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256

/** An address on the platform domain of a funded account; mail to it is stored. */
const mailbox = async (app: TestApp) => {
  const account = await createAccount(app)
  const local = `tls-${Math.random().toString(16).slice(2, 10)}`
  const addressId = await createAddress(app, account.userId, local)
  await app.run(Billing.use((b) => b.credit({ userId: account.userId, amount: 100, kind: "credit", reference: { type: "test" } })))
  return { account, addressId, address: `${local}@inbox.localhost` }
}

const storedCount = (app: TestApp, addressId: number) =>
  app.run(Database.use((db) => db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM inbound_messages WHERE address_id = $1", [addressId])))
    .then((rows) => rows[0]!.n)

describe("without certificate files (development)", () => {
  it("generates a certificate for MX_HOST into DATA_DIR, key owner-only, and serves it on the MX's STARTTLS", async () => {
    const files = generatedFiles(api.settings.dataDir, MX_HOST)
    expect(fs.statSync(files.key).mode & 0o777).toBe(0o600)
    const x = new X509Certificate(generatedCert)
    expect(x.subject).toBe(`CN=${MX_HOST}`)
    expect(x.subjectAltName).toBe(`DNS:${MX_HOST}`)

    const s = await startTls(api.ports.mx!, MX_HOST, generatedCert)
    try {
      expect(features(s.plainEhlo)).toContain("STARTTLS")
      expect(features(s.plainEhlo).some((f) => f.startsWith("AUTH"))).toBe(false)
      expect(s.authorized).toBe(true)
      expect(s.certificate.fingerprint256).toBe(fingerprint(generatedCert))
      expect(s.protocol).toMatch(/^TLSv1\.[23]$/)
      // After the upgrade: a fresh EHLO, and no second STARTTLS.
      const ehlo = await s.command("EHLO client.example.net")
      expect(ehlo.code).toBe(250)
      expect(features(ehlo)).not.toContain("STARTTLS")
      expect((await s.command("QUIT")).code).toBe(221)
    } finally {
      s.close()
    }
  })

  it("reuses the generated certificate on the next start with the same DATA_DIR", async () => {
    // A DATA_DIR holding what the first start generated (each test app removes its own on stop).
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "tls-reuse-"))
    fs.cpSync(path.join(api.settings.dataDir, "tls"), path.join(dataDir, "tls"), { recursive: true })
    const second = await makeTestApp({ workers: false, settings: { dataDir } })
    try {
      const s = await startTls(second.ports.mx!, MX_HOST, generatedCert)
      expect(s.certificate.fingerprint256).toBe(fingerprint(generatedCert))
      s.close()
      expect(fs.readFileSync(generatedFiles(dataDir, MX_HOST).cert, "utf8")).toBe(generatedCert)
    } finally {
      await second.stop()
    }
    // Another MX_HOST gets a certificate of its own.
    const renamed = await makeTestApp({ workers: false, settings: { mxHost: "mx2.inbox.localhost" } })
    try {
      const s = await startTls(renamed.ports.mx!, "mx2.inbox.localhost")
      expect(s.certificate.subject).toBe("CN=mx2.inbox.localhost")
      s.close()
    } finally {
      await renamed.stop()
    }
  })

  it("takes mail over STARTTLS from nodemailer with requireTLS, checking the certificate", async () => {
    const box = await mailbox(api)
    const transport = nodemailer.createTransport({
      host: "127.0.0.1",
      port: api.ports.mx!,
      secure: false,
      requireTLS: true,
      name: "client.sender.example",
      tls: { ca: generatedCert, servername: MX_HOST },
    })
    const info = await transport.sendMail({ from: "asha@sender.example", to: box.address, subject: "Kwa TLS", text: "Habari" })
    expect(info.response).toMatch(/^250 /)
    expect(await storedCount(api, box.addressId)).toBe(1)
    // The same client refuses a server whose certificate it cannot verify (another CA).
    const other = await makeCertificate(MX_HOST)
    const strict = nodemailer.createTransport({
      host: "127.0.0.1",
      port: api.ports.mx!,
      secure: false,
      requireTLS: true,
      tls: { ca: other.cert, servername: MX_HOST },
    })
    await expect(strict.sendMail({ from: "a@sender.example", to: box.address, subject: "x", text: "x" })).rejects.toThrow(/certificate|self.signed/i)
    expect(await storedCount(api, box.addressId)).toBe(1)
  })

  it("the sandbox: STARTTLS offered, AUTH PLAIN and LOGIN still taken without TLS, and over STARTTLS", async () => {
    const owner = await createAccount(api)
    const { username, password } = (await smtpLogin(api, owner.apiKey)) as { username: string; password: string }
    const plain = await plainEhlo(api.ports.sandbox!)
    expect(features(plain)).toContain("STARTTLS")
    expect(features(plain)).toContain("AUTH PLAIN LOGIN")
    plain.session.close()
    for (const method of ["PLAIN", "LOGIN"] as const) {
      const clear = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.sandbox!, secure: false, ignoreTLS: true, auth: { user: username, pass: password, method } })
      expect((await clear.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: `clear ${method}`, text: "t" })).response).toMatch(/^250 /)
    }
    const secured = nodemailer.createTransport({
      host: "127.0.0.1",
      port: api.ports.sandbox!,
      secure: false,
      requireTLS: true,
      tls: { ca: generatedCert, servername: MX_HOST },
      auth: { user: username, pass: password },
    })
    expect((await secured.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: "over STARTTLS", text: "t" })).response).toMatch(/^250 /)
    const list = await api.call("GET", "/api/sandbox/messages", { token: owner.apiKey })
    expect(list.body.data.map((m: { subject: string }) => m.subject).sort()).toEqual(["clear LOGIN", "clear PLAIN", "over STARTTLS"])
  })

  it("the sandbox's implicit-TLS port: TLS from the first byte, AUTH, capture", async () => {
    expect(api.ports.sandbox_smtps).toBeGreaterThan(0)
    const s = await implicitTls(api.ports.sandbox_smtps!, MX_HOST, generatedCert)
    expect(s.authorized).toBe(true)
    const ehlo = await s.command("EHLO app.example.net")
    expect(features(ehlo)).toContain("AUTH PLAIN LOGIN")
    expect(features(ehlo)).not.toContain("STARTTLS")
    s.close()
    const owner = await createAccount(api)
    const { username, password } = (await smtpLogin(api, owner.apiKey)) as { username: string; password: string }
    const smtps = nodemailer.createTransport({
      host: "127.0.0.1",
      port: api.ports.sandbox_smtps!,
      secure: true,
      tls: { ca: generatedCert, servername: MX_HOST },
      auth: { user: username, pass: password },
    })
    const info = await smtps.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: "over SMTPS", text: "t" })
    expect(info.response).toMatch(/^250 .*captured as \d+/)
    const list = await api.call("GET", "/api/sandbox/messages", { token: owner.apiKey })
    expect(list.body.data.map((m: { subject: string }) => m.subject)).toEqual(["over SMTPS"])
    // Plaintext on the SMTPS port gets no SMTP greeting.
    await expect(plainEhloWithin(api.ports.sandbox_smtps!, 1500)).rejects.toThrow()
  })
})

/** A plaintext EHLO that must answer within `ms`. */
const plainEhloWithin = (port: number, ms: number) =>
  Promise.race([plainEhlo(port), new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no plaintext greeting")), ms))])

describe("operator certificate files", () => {
  let dir: string
  let app: TestApp
  let first: Awaited<ReturnType<typeof makeCertificate>>
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "tls-files-"))
    first = await makeCertificate("mail.example.co.tz")
    fs.writeFileSync(path.join(dir, "cert.pem"), first.cert)
    fs.writeFileSync(path.join(dir, "key.pem"), first.key)
    app = await makeTestApp({
      workers: false,
      settings: {
        tlsCertFile: Option.some(path.join(dir, "cert.pem")),
        tlsKeyFile: Option.some(path.join(dir, "key.pem")),
      },
    })
  })
  afterAll(async () => {
    await app?.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  const served = async (which: "mx" | "sandbox" | "sandbox_smtps") => {
    const s = which === "sandbox_smtps"
      ? await implicitTls(app.ports.sandbox_smtps!, "mail.example.co.tz")
      : await startTls(app.ports[which]!, "mail.example.co.tz")
    s.close()
    return s.certificate.fingerprint256
  }

  const until = async (check: () => Promise<boolean>, ms = 5000) => {
    const deadline = Date.now() + ms
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error("timed out")
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  it("serves them on every listener instead of a generated one", async () => {
    for (const which of ["mx", "sandbox", "sandbox_smtps"] as const) expect(await served(which), which).toBe(first.fingerprint)
    expect(fs.existsSync(generatedFiles(app.settings.dataDir, MX_HOST).cert)).toBe(false)
  })

  it("re-reads them on SIGHUP; a broken file at reload keeps the certificate in use", async () => {
    const renewed = await makeCertificate("mail.example.co.tz")
    fs.writeFileSync(path.join(dir, "cert.pem"), renewed.cert)
    fs.writeFileSync(path.join(dir, "key.pem"), renewed.key)
    // Connections opened before the signal keep the old one; new ones get the renewed one.
    expect(await served("mx")).toBe(first.fingerprint)
    process.kill(process.pid, "SIGHUP")
    await until(async () => (await served("mx")) === renewed.fingerprint)
    await until(async () => (await served("sandbox")) === renewed.fingerprint)
    await until(async () => (await served("sandbox_smtps")) === renewed.fingerprint)

    // A half-written renewal: the key of another certificate.
    const other = await makeCertificate("mail.example.co.tz")
    fs.writeFileSync(path.join(dir, "key.pem"), other.key)
    process.kill(process.pid, "SIGHUP")
    await new Promise((r) => setTimeout(r, 500))
    expect(await served("mx")).toBe(renewed.fingerprint)
    // Fixed: the next signal picks the good pair up.
    fs.writeFileSync(path.join(dir, "cert.pem"), other.cert)
    process.kill(process.pid, "SIGHUP")
    await until(async () => (await served("mx")) === other.fingerprint)
  })
})

describe("production without certificate files", () => {
  it("offers no STARTTLS on the MX or the sandbox, and opens no SMTPS port; plaintext mail still flows", async () => {
    const prod = await makeTestApp({ workers: false, settings: { production: true } })
    try {
      for (const port of [prod.ports.mx!, prod.ports.sandbox!]) {
        const ehlo = await plainEhlo(port)
        expect(ehlo.code).toBe(250)
        expect(features(ehlo)).not.toContain("STARTTLS")
        const refused = await ehlo.session.command("STARTTLS")
        expect(refused.code).toBeGreaterThanOrEqual(500)
        ehlo.session.close()
      }
      expect(prod.ports.sandbox_smtps).toBe(0)
      expect(fs.existsSync(path.join(prod.settings.dataDir, "tls"))).toBe(false)
      const box = await mailbox(prod)
      const transport = nodemailer.createTransport({ host: "127.0.0.1", port: prod.ports.mx!, secure: false, ignoreTLS: true })
      await transport.sendMail({ from: "a@sender.example", to: box.address, subject: "plain", text: "t" })
      expect(await storedCount(prod, box.addressId)).toBe(1)
      // A client that insists on TLS gets none.
      const insisting = nodemailer.createTransport({ host: "127.0.0.1", port: prod.ports.mx!, secure: false, requireTLS: true })
      await expect(insisting.sendMail({ from: "a@sender.example", to: box.address, subject: "x", text: "x" })).rejects.toThrow(/STARTTLS/)
    } finally {
      await prod.stop()
    }
  })
})
