/** The MX session policy without sockets: what RCPT TO and the end of DATA answer, and why. */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_BAD_RECIPIENTS, newSessionState, onMessage, onRecipient } from "../../src/smtp/session.ts"
import { createAccount } from "../support/accounts.ts"
import { balance, countMessages, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}`
const rcpt = (state: ReturnType<typeof newSessionState>, address: string) => app.api.run(Effect.result(onRecipient(state, address)))
const client = { ip: "::ffff:127.0.0.1", helo: "client.example.net" }

describe("RCPT TO policy", () => {
  it("accepts our addresses in any case and with a +tag, refuses unknown ones with 550 5.1.1", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 100)
    const local = unique("info")
    const address = await createAddress(app.api, apiKey, local)
    const state = newSessionState()
    for (const form of [address.email, `${local.toUpperCase()}@INBOX.LOCALHOST`, `${local}+news@inbox.localhost`, `${local}@inbox.localhost.`]) {
      const r = await rcpt(state, form)
      expect(r._tag, form).toBe("Success")
      if (r._tag === "Success") expect(r.success).toMatchObject({ addressId: address.id })
    }
    for (const form of [`nobody-${local}@inbox.localhost`, `${local}@other.example`, "no-at-sign", `"${local}"@inbox.localhost`, "@inbox.localhost"]) {
      const r = await rcpt(state, form)
      expect(r._tag, form).toBe("Failure")
      if (r._tag === "Failure") {
        expect(r.failure.code).toBe(550)
        expect(r.failure.message).toMatch(/^5\.1\.1 /)
      }
    }
  })

  it("defers with 452 4.2.2 when the wallet cannot pay 5 TZS per address copy", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const a = await createAddress(app.api, apiKey, unique("a"))
    const b = await createAddress(app.api, apiKey, unique("b"))
    const broke = await rcpt(newSessionState(), a.email)
    expect(broke._tag).toBe("Failure")
    if (broke._tag === "Failure") expect([broke.failure.code, broke.failure.message.slice(0, 5)]).toEqual([452, "4.2.2"])

    await fund(app.api, userId, 5)
    const state = newSessionState()
    expect((await rcpt(state, a.email))._tag).toBe("Success")
    // The same address again (another form) costs nothing more; a second address would.
    expect((await rcpt(state, a.email.replace("@", "+x@")))._tag).toBe("Success")
    const second = await rcpt(state, b.email)
    expect(second._tag === "Failure" && second.failure.code).toBe(452)
  })

  it("drops a connection after too many rejected recipients (421)", async () => {
    const state = newSessionState()
    const codes: Array<number> = []
    for (let i = 0; i < MAX_BAD_RECIPIENTS + 2; i++) {
      const r = await rcpt(state, `nobody-${i}@inbox.localhost`)
      codes.push(r._tag === "Failure" ? r.failure.code : 250)
    }
    expect(codes.slice(0, MAX_BAD_RECIPIENTS - 1).every((c) => c === 550)).toBe(true)
    expect(codes[MAX_BAD_RECIPIENTS - 1]).toBe(421)
  })
})

describe("end of DATA", () => {
  it("stores one message per address copy, charges 5 TZS each, and answers with the ids", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 100)
    const a = await createAddress(app.api, apiKey, unique("a"))
    const b = await createAddress(app.api, apiKey, unique("b"))
    const text = await app.api.run(onMessage(newSessionState(), {
      raw: Buffer.from(plainMessage({ to: a.email })),
      mailFrom: "alice@sender.example",
      recipients: [a.email, a.email.toUpperCase(), b.email],
      client,
    }))
    expect(text).toMatch(/^2\.0\.0 OK: stored as \d+,\d+$/)
    expect(await countMessages(app.api, userId)).toBe(2)
    expect(await balance(app.api, userId)).toBe(90)
    const mime = await query<{ n: number }>(app.api, "SELECT count(*)::int8 AS n FROM inbound_mime WHERE user_id = $1", [userId])
    expect(mime[0]!.n).toBe(1)
  })

  it("refuses the whole message with 452 when the wallet ran dry after RCPT, storing nothing", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 5)
    const a = await createAddress(app.api, apiKey, unique("a"))
    const b = await createAddress(app.api, apiKey, unique("b"))
    const r = await app.api.run(Effect.result(onMessage(newSessionState(), { raw: Buffer.from(plainMessage()), mailFrom: "", recipients: [a.email, b.email], client })))
    expect(r._tag === "Failure" && [r.failure.code, r.failure.message.slice(0, 5)]).toEqual([452, "4.2.2"])
    expect(await countMessages(app.api, userId)).toBe(0)
    expect(await balance(app.api, userId)).toBe(5)
    expect(await query(app.api, "SELECT id FROM inbound_mime WHERE user_id = $1", [userId])).toHaveLength(0)
  })

  it("answers 550 when every recipient stopped routing between RCPT and DATA", async () => {
    const r = await app.api.run(Effect.result(onMessage(newSessionState(), { raw: Buffer.from(plainMessage()), mailFrom: "", recipients: ["gone@inbox.localhost"], client })))
    expect(r._tag === "Failure" && r.failure.code).toBe(550)
  })
})
