/** The self-signed certificate made on a thread of its own (src/smtp/self-signed.ts). */
import { X509Certificate, createPrivateKey } from "node:crypto"
import { describe, expect, it } from "vitest"
import { generateSelfSigned } from "../../src/smtp/self-signed.ts"

describe("generateSelfSigned", () => {
  it("makes, on its thread, a certificate for the host valid for 825 days from now, with its key", async () => {
    const now = Date.UTC(2026, 10, 26, 9, 0, 0)
    const pems = await generateSelfSigned("mx.thread.example", now)
    const x = new X509Certificate(pems.cert)
    expect(x.subject).toContain("CN=mx.thread.example")
    expect(x.subjectAltName).toBe("DNS:mx.thread.example")
    expect(Date.parse(x.validFrom)).toBe(now)
    expect(Date.parse(x.validTo) - Date.parse(x.validFrom)).toBe(825 * 86_400_000)
    expect(x.checkPrivateKey(createPrivateKey(pems.private))).toBe(true)
  })
})
