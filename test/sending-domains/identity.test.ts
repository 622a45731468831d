/**
 * SenderIdentities: every From rule of the contract (effects/sending-domains/identity.ts), and
 * that the DKIM key it hands out really signs mail the published record verifies.
 */
import { Effect, Option } from "effect"
import { dkimVerify } from "mailauth"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../effects/config.ts"
import { Database } from "../../effects/ports/Database.ts"
import { generateDkimKeyPair, sealDkimKey } from "../../effects/sending-domains/dkim.ts"
import { SenderIdentities } from "../../effects/sending-domains/identity.ts"
import { recordsFor, type SendingDomainStatus } from "../../effects/sending-domains/schema.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
})
afterAll(() => api.stop())

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}.co.tz`

/** A sending domain row in the given state (the HTTP flow is covered in domains.test.ts). */
const insertDomain = (userId: number, status: SendingDomainStatus, senders: ReadonlyArray<string> = []) =>
  api.run(Effect.gen(function*() {
    const db = yield* Database
    const config = yield* AppConfig
    const keys = yield* generateDkimKeyPair
    const domain = unique("duka")
    const [row] = yield* db.query<{ id: number }>(
      `INSERT INTO sending_domains (user_id, domain, status, from_local_part, dkim_public_key, dkim_private_key_sealed)
       VALUES ($1, $2, $3, 'hello', $4, $5) RETURNING id`,
      [userId, domain, status, keys.publicKey, yield* sealDkimKey(config.secretsKey, keys.privateKeyPem)],
    )
    yield* db.query("INSERT INTO sender_addresses (user_id, domain_id, local_part, is_default) VALUES ($1, $2, 'hello', true)", [userId, row!.id])
    for (const s of senders) {
      yield* db.query("INSERT INTO sender_addresses (user_id, domain_id, local_part) VALUES ($1, $2, $3)", [userId, row!.id, s])
    }
    const dkimRecord = recordsFor({ domain, dkim_public_key: keys.publicKey }, { mailServerIp: "127.0.0.1", platformDomain: "inbox.localhost" })[0]!
    return { id: row!.id, domain, publicKey: keys.publicKey, dkimRecord }
  }))

type Request = { from_domain_id?: number; from_address?: string }
const resolve = (userId: number, request: Request) => api.run(SenderIdentities.use((s) => s.senderIdentity(userId, request)))
const refuse = (userId: number, request: Request) =>
  api.run(Effect.flip(SenderIdentities.use((s) => s.senderIdentity(userId, request))))

describe("platform sender (no from_domain_id)", () => {
  it("is noreply@<platform> by default, without DKIM", async () => {
    const { userId } = await createAccount(api)
    expect(await resolve(userId, {})).toEqual({ from: "noreply@inbox.localhost", domainId: null, dkim: Option.none() })
  })

  it("takes a custom local part on the platform domain, in any case", async () => {
    const { userId } = await createAccount(api)
    expect((await resolve(userId, { from_address: "billing@inbox.localhost" })).from).toBe("billing@inbox.localhost")
    expect((await resolve(userId, { from_address: " Alerts-2@INBOX.localhost " })).from).toBe("alerts-2@inbox.localhost")
  })

  it("refuses other domains, bad local parts and role mailboxes with 400 on from_address", async () => {
    const { userId } = await createAccount(api)
    const own = await insertDomain(userId, "verified")
    for (const from_address of ["ceo@bank.co.tz", `hello@${own.domain}`, "bad_local@inbox.localhost", "not an address", "", "postmaster@inbox.localhost", "x@sub.inbox.localhost"]) {
      const e = await refuse(userId, { from_address })
      expect(e._tag, from_address).toBe("ValidationError")
      expect(e._tag === "ValidationError" && e.issues[0]).toMatchObject({ field: "from_address", code: "VALIDATION_ERROR" })
    }
  })
})

describe("own sending domain (from_domain_id)", () => {
  it("sends from the default local part with the domain's DKIM key", async () => {
    const { userId } = await createAccount(api)
    const d = await insertDomain(userId, "verified")
    const identity = await resolve(userId, { from_domain_id: d.id })
    expect(identity.from).toBe(`hello@${d.domain}`)
    expect(identity.domainId).toBe(d.id)
    const dkim = Option.getOrThrow(identity.dkim)
    expect(dkim).toMatchObject({ domainName: d.domain, keySelector: "mail" })
    expect(dkim.privateKey).toMatch(/^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END PRIVATE KEY-----\n$/)
    expect((await resolve(userId, { from_domain_id: d.id, from_address: `HELLO@${d.domain.toUpperCase()}` })).from).toBe(`hello@${d.domain}`)
  })

  it("accepts recorded senders and refuses unknown ones or other domains with 400 on from_address", async () => {
    const { userId } = await createAccount(api)
    const d = await insertDomain(userId, "verified", ["billing"])
    expect((await resolve(userId, { from_domain_id: d.id, from_address: `billing@${d.domain}` })).from).toBe(`billing@${d.domain}`)
    for (const from_address of [`sales@${d.domain}`, "billing@inbox.localhost", `billing@x.${d.domain}`, "nope"]) {
      const e = await refuse(userId, { from_domain_id: d.id, from_address })
      expect(e._tag === "ValidationError" && e.issues[0]!.field, from_address).toBe("from_address")
    }
  })

  it("is 403 while the domain is pending or suspended, or when it is another account's; 404 when unknown", async () => {
    const { userId } = await createAccount(api)
    const other = await createAccount(api)
    const pending = await insertDomain(userId, "pending")
    const suspended = await insertDomain(userId, "suspended")
    const foreign = await insertDomain(other.userId, "verified")
    for (const id of [pending.id, suspended.id, foreign.id]) {
      expect((await refuse(userId, { from_domain_id: id }))._tag).toBe("Forbidden")
    }
    const foreignError = await refuse(userId, { from_domain_id: foreign.id, from_address: `hello@${foreign.domain}` })
    expect(foreignError._tag).toBe("Forbidden")
    expect(JSON.stringify(foreignError)).not.toContain("PRIVATE KEY")
    expect((await refuse(userId, { from_domain_id: 99_999_999 }))._tag).toBe("NotFound")
  })

  it("hands out a key that signs mail the published DKIM record verifies", async () => {
    const { userId } = await createAccount(api)
    const d = await insertDomain(userId, "verified")
    const identity = await resolve(userId, { from_domain_id: d.id })
    const dkim = Option.getOrThrow(identity.dkim)

    // Web Crypto: the PEM imports, and its signature checks against the published p= key.
    const der = Buffer.from(dkim.privateKey.replace(/-----[A-Z ]+-----|\s/g, ""), "base64")
    const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
    const privateKey = await crypto.subtle.importKey("pkcs8", der, algorithm, false, ["sign"])
    const published = d.dkimRecord.value.match(/p=([A-Za-z0-9+/=]+)/)![1]!
    const publicKey = await crypto.subtle.importKey("spki", Buffer.from(published, "base64"), algorithm, false, ["verify"])
    const data = new TextEncoder().encode("Habari")
    expect(await crypto.subtle.verify(algorithm, publicKey, await crypto.subtle.sign(algorithm, privateKey, data), data)).toBe(true)

    // nodemailer signs with it the way the outbound relay will; mailauth verifies against the record.
    const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, dkim: dkim })
    const info = await transport.sendMail({ from: identity.from, to: "a@example.net", subject: "Habari", text: "Karibu" })
    const result = await dkimVerify(info.message as Buffer, {
      resolver: async (name: string, type: string) => {
        if (type === "TXT" && name === d.dkimRecord.host) return [[d.dkimRecord.value]]
        throw Object.assign(new Error("no record"), { code: "ENOTFOUND" })
      },
    })
    expect(result.results[0]!.status.result).toBe("pass")
    expect(result.results[0]!.signingDomain).toBe(d.domain)
  })
})
