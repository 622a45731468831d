/**
 * The MX's intake of return paths (issue 12 phase 2), focused: a forged or unknown return path is
 * refused like an unknown mailbox and counts toward the bad-recipient limit; a valid one is taken
 * at a zero balance and charges nothing; one message to a return path and a mailbox is read as a
 * report and stored (and charged) for the mailbox; RSET forgets a return path; the platform
 * domain's `bounces` local part cannot be taken by an address.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verpTag } from "../../effects/bounces/verp.ts"
import { Ingest } from "../../effects/ingest/service.ts"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { MAX_BAD_RECIPIENTS, newSessionState, onRecipient } from "../../src/smtp/session.ts"
import type { TestApp } from "../support/app.ts"
import { connectSmtp, dataBlock, type RawSmtp } from "../support/smtp-client.ts"
import { balance, fundedAccount, makeOutboundApp, movements, query, startRelay, type TestRelay } from "../outbound/support.ts"
import { bounceFixture, sendThroughRelay } from "./support.ts"

const JUMA = "juma.hamisi.8842@gmail.com"
const HALIMA = "halima.omari@yahoo.com"

let relay: TestRelay
let api: TestApp
beforeAll(async () => {
  relay = await startRelay()
  api = await makeOutboundApp({ relayUrl: relay.url })
})
afterAll(async () => {
  await api?.stop()
  await relay?.close()
})

const rcpt = (state: ReturnType<typeof newSessionState>, address: string) => api.run(Effect.result(onRecipient(state, address)))

/** A return path whose tag's first hex digit is changed. */
const forge = (path: string) => path.replace(/\.([0-9a-f])([0-9a-f]{9})@/, (_m, a: string, rest: string) => `.${a === "0" ? "1" : "0"}${rest}@`)

const feedbackOf = async (emailId: number) =>
  Object.fromEntries(
    (await query<{ email: string; feedback_type: string | null; feedback_smtp_code: string | null }>(
      api,
      "SELECT email, feedback_type, feedback_smtp_code FROM outbound_recipients WHERE message_id = $1 ORDER BY id",
      [emailId],
    )).map((r) => [r.email, [r.feedback_type, r.feedback_smtp_code]]),
  )

const inboundCount = async (where: string, params: ReadonlyArray<unknown>) =>
  Number((await query<{ n: number }>(api, `SELECT count(*)::int8 AS n FROM inbound_messages WHERE ${where}`, params))[0]!.n)

/** A mailbox on the platform domain, owned by a funded account. */
const mailbox = async (funds: number) => {
  const owner = await fundedAccount(api, funds)
  const local = `box-${randomHexSync(4)}`
  const r = await api.call("POST", "/api/inbound/addresses", { token: owner.apiKey, body: { local_part: local } })
  expect(r.status, JSON.stringify(r.body)).toBe(201)
  return { owner, id: r.body.data.id as number, email: `${local}@inbox.localhost` }
}

const session = async (): Promise<RawSmtp> => {
  const smtp = await connectSmtp(api.ports.mx!)
  expect((await smtp.command("EHLO mail-sor-f69.google.com")).code).toBe(250)
  return smtp
}

const sendData = async (smtp: RawSmtp, raw: Uint8Array) => {
  expect((await smtp.command("DATA")).code).toBe(354)
  smtp.write(dataBlock(raw))
  return smtp.reply()
}

describe("RCPT TO a return path", () => {
  it("refuses a forged tag, an unknown message, a non-VERP bounces+ address with 550 5.1.1, counted toward the limit", async () => {
    const sender = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, sender, [JUMA])
    const good = sent.returnPaths.get(JUMA)!
    const unknownId = 2_000_000_000
    const signedButUnknown = `bounces+${unknownId}.0.${verpTag(api.settings.secretsKey, unknownId, 0)}@inbox.localhost`
    const otherIndex = `bounces+${sent.id}.5.${verpTag(api.settings.secretsKey, sent.id, 5)}@inbox.localhost`

    const state = newSessionState()
    for (const address of [forge(good), signedButUnknown, otherIndex, "bounces+hello@inbox.localhost", "bounces@inbox.localhost"]) {
      const r = await rcpt(state, address)
      expect(r._tag, address).toBe("Failure")
      if (r._tag === "Failure") expect([r.failure.code, r.failure.message.slice(0, 6)], address).toEqual([550, "5.1.1 "])
    }
    expect(state.badRecipients).toBe(5)
    expect(state.envelope.returnPaths.size).toBe(0)
    // The genuine one is taken (free: nothing held) and does not count.
    const ok = await rcpt(state, good.toUpperCase())
    expect(ok._tag).toBe("Success")
    expect(state.badRecipients).toBe(5)
    expect(state.envelope.held.size).toBe(0)
    const codes: Array<number> = []
    for (let i = state.badRecipients; i < MAX_BAD_RECIPIENTS; i++) {
      const r = await rcpt(state, forge(good))
      codes.push(r._tag === "Failure" ? r.failure.code : 250)
    }
    expect(codes.slice(0, -1).every((c) => c === 550)).toBe(true)
    expect(codes.at(-1)).toBe(421)
  })

  it("over SMTP: a forged tag is 550 5.1.1 and the connection is dropped at the limit", async () => {
    const sender = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, sender, [JUMA])
    const smtp = await session()
    expect((await smtp.command("MAIL FROM:<>")).code).toBe(250)
    const replies = []
    for (let i = 0; i < MAX_BAD_RECIPIENTS; i++) replies.push(await smtp.command(`RCPT TO:<${forge(sent.returnPaths.get(JUMA)!)}>`))
    expect(replies.slice(0, -1).every((r) => r.code === 550 && r.text.startsWith("5.1.1 "))).toBe(true)
    expect(replies.at(-1)!.code).toBe(421)
    await smtp.closed
    expect(await feedbackOf(sent.id)).toEqual({ [JUMA]: [null, null] })
  })
})

describe("end of DATA for a return path", () => {
  it("is taken at a zero balance and charges nothing: the report is recorded, nothing is stored", async () => {
    // 10 TZS pays the two recipients of the send exactly: the wallet is empty afterwards.
    const sender = await fundedAccount(api, 10)
    const sent = await sendThroughRelay(api, relay, sender, [JUMA, HALIMA])
    expect(await balance(api, sender.userId)).toBe(0)
    const before = await movements(api, sender.userId)

    const smtp = await session()
    expect((await smtp.command("MAIL FROM:<>")).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${sent.returnPaths.get(JUMA)}>`)).code).toBe(250)
    const done = await sendData(smtp, bounceFixture("gmail-dsn-5.1.1.eml"))
    expect([done.code, done.text]).toEqual([250, "2.0.0 OK: delivery report received"])
    // The same session goes on: the complaint for the other recipient.
    expect((await smtp.command("MAIL FROM:<feedback@arf.mail.yahoo.com>")).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${sent.returnPaths.get(HALIMA)}>`)).code).toBe(250)
    expect((await sendData(smtp, bounceFixture("arf-yahoo-abuse.eml"))).code).toBe(250)
    smtp.destroy()

    expect(await feedbackOf(sent.id)).toEqual({ [JUMA]: ["bounced", "5.1.1"], [HALIMA]: ["complained", null] })
    expect(await balance(api, sender.userId)).toBe(0)
    expect(await movements(api, sender.userId)).toEqual(before)
    expect(await inboundCount("to_addr LIKE 'bounces+%'", [])).toBe(0)
  })

  it("a message to a return path and a mailbox: read as a report, stored and charged once for the mailbox", async () => {
    const sender = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, sender, [JUMA])
    const box = await mailbox(100)
    const senderMovements = await movements(api, sender.userId)

    const smtp = await session()
    expect((await smtp.command("MAIL FROM:<>")).code).toBe(250)
    const path = sent.returnPaths.get(JUMA)!
    expect((await smtp.command(`RCPT TO:<${path}>`)).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${box.email}>`)).code).toBe(250)
    // The same return path again is the same recipient: one report.
    expect((await smtp.command(`RCPT TO:<${path.toUpperCase()}>`)).code).toBe(250)
    const done = await sendData(smtp, bounceFixture("gmail-dsn-5.1.1.eml"))
    smtp.destroy()
    expect(done.code).toBe(250)
    const ids = /stored as (\d+)$/.exec(done.text)
    expect(ids, done.text).not.toBeNull()

    expect(await feedbackOf(sent.id)).toEqual({ [JUMA]: ["bounced", "5.1.1"] })
    const stored = await query<{ id: number; address_id: number; to_addr: string }>(
      api,
      "SELECT id, address_id, to_addr FROM inbound_messages WHERE user_id = $1",
      [box.owner.userId],
    )
    expect(stored).toEqual([{ id: Number(ids![1]), address_id: box.id, to_addr: box.email }])
    expect(await balance(api, box.owner.userId)).toBe(95)
    expect(await movements(api, sender.userId)).toEqual(senderMovements)
    expect(await inboundCount("to_addr ILIKE 'bounces+%'", [])).toBe(0)
  })

  it("RSET forgets a return path: the next transaction's message is not read as its report", async () => {
    const sender = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, sender, [JUMA])
    const box = await mailbox(100)
    const smtp = await session()
    expect((await smtp.command("MAIL FROM:<>")).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${sent.returnPaths.get(JUMA)}>`)).code).toBe(250)
    expect((await smtp.command("RSET")).code).toBe(250)
    expect((await smtp.command("MAIL FROM:<someone@sender.example>")).code).toBe(250)
    expect((await smtp.command(`RCPT TO:<${box.email}>`)).code).toBe(250)
    const done = await sendData(smtp, bounceFixture("gmail-dsn-5.1.1.eml"))
    smtp.destroy()
    expect(done.text).toMatch(/stored as \d+$/)
    expect(await feedbackOf(sent.id)).toEqual({ [JUMA]: [null, null] })
    expect(await inboundCount("user_id = $1", [box.owner.userId])).toBe(1)
  })

  it("without an MX session (Ingest.deliver looking recipients up) a return path is read as a report too", async () => {
    const sender = await fundedAccount(api, 100)
    const sent = await sendThroughRelay(api, relay, sender, [JUMA])
    const ids = await api.run(Ingest.use((ingest) =>
      ingest.deliver({
        raw: bounceFixture("gmail-dsn-5.1.1.eml"),
        mailFrom: "",
        recipients: [sent.returnPaths.get(JUMA)!],
        client: { ip: "::ffff:127.0.0.1", helo: "mail-sor-f69.google.com", tls: null },
      })
    ))
    expect(ids).toEqual([])
    expect(await feedbackOf(sent.id)).toEqual({ [JUMA]: ["bounced", "5.1.1"] })
  })
})

describe("the return paths' local part", () => {
  it("cannot be an address on the platform domain (409 CONFLICT, field local_part); other names and own domains can", async () => {
    const owner = await fundedAccount(api, 0)
    const post = (body: unknown) => api.call("POST", "/api/inbound/addresses", { token: owner.apiKey, body })
    const taken = await post({ local_part: "bounces" })
    expect(taken.status).toBe(409)
    expect(taken.body.errors[0]).toMatchObject({ code: "CONFLICT", field: "local_part" })
    expect((await post({ local_part: `bounces-${randomHexSync(3)}` })).status).toBe(201)
    // The return paths live on the platform domain only: an account's own domain may have bounces@.
    const domain = `own-${randomHexSync(4)}.example.co.tz`
    const [row] = await query<{ id: number }>(
      api,
      `INSERT INTO receiving_domains (user_id, domain, status, verification_token, verified_at)
       VALUES ($1, $2, 'verified', $3, now()) RETURNING id`,
      [owner.userId, domain, randomHexSync(32)],
    )
    const own = await post({ local_part: "bounces", domain_id: Number(row!.id) })
    expect(own.status, JSON.stringify(own.body)).toBe(201)
    expect(own.body.data.email).toBe(`bounces@${domain}`)
  })
})
