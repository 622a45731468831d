/** AES-256-GCM secrets at rest (effects/shared/secretbox.ts). */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { open, openText, seal } from "../../effects/shared/secretbox.ts"

const key = crypto.getRandomValues(new Uint8Array(32))
const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(e)

describe("secretbox", () => {
  it("round-trips text and bytes, with a fresh nonce each time", async () => {
    const a = await run(seal(key, "whsec_0123456789abcdef0123456789abcdef", "webhook.secret"))
    const b = await run(seal(key, "whsec_0123456789abcdef0123456789abcdef", "webhook.secret"))
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]+$/)
    expect(a).not.toBe(b)
    expect(await run(openText(key, a, "webhook.secret"))).toBe("whsec_0123456789abcdef0123456789abcdef")
    const bytes = new Uint8Array([0, 1, 2, 255])
    expect(await run(open(key, await run(seal(key, bytes))))).toEqual(bytes)
  })

  it("refuses another key, another context, tampering and garbage", async () => {
    const sealed = await run(seal(key, "secret", "sms.provider_key"))
    const other = crypto.getRandomValues(new Uint8Array(32))
    const fails = async (k: Uint8Array, s: string, ctx: string) =>
      (await run(Effect.flip(openText(k, s, ctx))))._tag
    expect(await fails(other, sealed, "sms.provider_key")).toBe("SecretboxError")
    expect(await fails(key, sealed, "webhook.secret")).toBe("SecretboxError")
    const flipped = sealed.slice(0, -2) + (sealed.at(-2) === "A" ? "B" : "A") + sealed.at(-1)
    expect(await fails(key, flipped, "sms.provider_key")).toBe("SecretboxError")
    expect(await fails(key, "v1.abc", "")).toBe("SecretboxError")
    expect(await fails(key, "plain text", "")).toBe("SecretboxError")
  })

  // Values sealed by the earlier WebCrypto implementation are in databases: the layout
  // (nonce ‖ ciphertext ‖ tag, context as additional data) must stay WebCrypto's in both directions.
  it("opens what WebCrypto AES-GCM sealed, and seals what WebCrypto opens", async () => {
    const aes = await crypto.subtle.importKey("raw", key, { name: "AES-GCM" }, false, ["encrypt", "decrypt"])
    for (const context of ["webhook.secret", ""]) {
      const nonce = crypto.getRandomValues(new Uint8Array(12))
      const body = new Uint8Array(
        await crypto.subtle.encrypt({ name: "AES-GCM", iv: nonce, additionalData: new TextEncoder().encode(context) }, aes, new TextEncoder().encode("whsec_é✓")),
      )
      const sealed = "v1." + Buffer.concat([nonce, body]).toString("base64url")
      expect(await run(openText(key, sealed, context))).toBe("whsec_é✓")

      const ours = Buffer.from((await run(seal(key, "sk_live_ünï", context))).slice(3), "base64url")
      const plain = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: ours.subarray(0, 12), additionalData: new TextEncoder().encode(context) },
        aes,
        ours.subarray(12),
      )
      expect(new TextDecoder().decode(plain)).toBe("sk_live_ünï")
    }
  })

  it("treats a wrong-sized key as a defect (a configuration bug)", async () => {
    await expect(run(seal(new Uint8Array(16), "x"))).rejects.toThrow(/32-byte key/)
  })
})
