/**
 * The self-signed certificate made in a process of its own, or on a thread where no process can
 * start (src/smtp/self-signed.ts), and kept in DATA_DIR (src/smtp/tls.ts).
 */
import { Effect } from "effect"
import { X509Certificate, createPrivateKey } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { generateInProcess, generateOnThread, generateSelfSigned, type Pems } from "../../src/smtp/self-signed.ts"
import { generatedFiles, selfSigned } from "../../src/smtp/tls.ts"

const expectCertificate = (pems: Pems, host: string, now: number) => {
  const x = new X509Certificate(pems.cert)
  expect(x.subject).toContain(`CN=${host}`)
  expect(x.subjectAltName).toBe(`DNS:${host}`)
  expect(Date.parse(x.validFrom)).toBe(now)
  expect(Date.parse(x.validTo) - Date.parse(x.validFrom)).toBe(825 * 86_400_000)
  expect(x.checkPrivateKey(createPrivateKey(pems.private))).toBe(true)
}

describe("generateSelfSigned", () => {
  const now = Date.UTC(2026, 10, 26, 9, 0, 0)

  it("makes, in a process of its own, a certificate for the host valid for 825 days from now, with its key", async () => {
    expectCertificate(await generateInProcess("mx.process.example", now), "mx.process.example", now)
    expectCertificate(await generateSelfSigned("mx.default.example", now), "mx.default.example", now)
  })

  it("gives up on a child that does not answer in time (the thread then makes it)", async () => {
    await expect(generateInProcess("mx.stuck.example", now, 1)).rejects.toThrow(/SIGKILL/)
  })

  it("makes the same certificate on a thread, where no process can start", async () => {
    expectCertificate(await generateOnThread("mx.thread.example", now), "mx.thread.example", now)
  })
})

describe("selfSigned in DATA_DIR", () => {
  const pairOf = (dataDir: string) => Effect.runPromise(selfSigned(dataDir, "mx.pair.example"))

  it("gives instances starting together one pair, and every later start the same", { timeout: 60_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "tls-pair-"))
    try {
      const [a, b] = await Promise.all([pairOf(dataDir), pairOf(dataDir)])
      expect(b.cert).toBe(a.cert)
      expect(b.key).toBe(a.key)
      expect(new X509Certificate(a.cert).checkPrivateKey(createPrivateKey(a.key))).toBe(true)
      const later = await pairOf(dataDir)
      expect(later.cert).toBe(a.cert)
      // Only the pair's directory is left: the loser's staging directory went away.
      expect(fs.readdirSync(path.join(dataDir, "tls"))).toEqual(["mx.pair.example"])
      expect(fs.statSync(generatedFiles(dataDir, "mx.pair.example").key).mode & 0o777).toBe(0o600)
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it("starts after a start killed while writing the pair (a half-written staging directory)", { timeout: 60_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "tls-pair-"))
    try {
      // What a SIGKILL between the key and the certificate leaves behind.
      fs.mkdirSync(path.join(dataDir, "tls", ".new-killed"), { recursive: true })
      fs.writeFileSync(path.join(dataDir, "tls", ".new-killed", "key.pem"), "-----BEGIN PRIVATE KEY-----\nMIIE")
      const pair = await pairOf(dataDir)
      expect(new X509Certificate(pair.cert).checkPrivateKey(createPrivateKey(pair.key))).toBe(true)
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
