/**
 * OutboundSender (effects/outbound/contract.ts), the path the AI agent's auto-replies take: the
 * same rules and money as POST /api/outbound/emails, extra headers passed through (and checked),
 * errors as values.
 */
import { Effect, Exit } from "effect"
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { OutboundSender, type SendRequest } from "../../effects/outbound/contract.ts"
import { createAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { balance, detail, expectLedgerConsistent, fund, fundedAccount, makeOutboundApp, movements, rcpt, startRelay, type TestRelay } from "./support.ts"

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
beforeEach(() => relay.reset())

const sendVia = (userId: number, request: SendRequest) => api.run(Effect.exit(OutboundSender.use((s) => s.send(userId, request))))

const failureTag = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? (exit.cause.reasons.find((r) => r._tag === "Fail") as { error: { _tag: string } } | undefined)?.error._tag : undefined

describe("OutboundSender.send", () => {
  it("sends with the agent's threading headers and answers {id, status, amount_tzs}", async () => {
    const a = await fundedAccount(api, 100)
    const to = rcpt()
    const exit = await sendVia(a.userId, {
      to: [`Asha <${to}>`],
      subject: "Re: Opening hours",
      text_body: "We open at 9.",
      from_address: "support@inbox.localhost",
      headers: { "In-Reply-To": "<m-1@sender.example>", References: "<m-1@sender.example>", "Auto-Submitted": "auto-replied" },
    })
    expect(Exit.isSuccess(exit)).toBe(true)
    const sent = Exit.isSuccess(exit) ? exit.value : undefined
    expect(sent).toEqual({ id: expect.any(Number), status: "sent", amount_tzs: 5 })
    const parsed = await simpleParser(relay.to(to)[0]!.raw)
    expect(parsed.inReplyTo).toBe("<m-1@sender.example>")
    expect(parsed.headers.get("auto-submitted")).toBe("auto-replied")
    expect(parsed.from?.value[0]?.address).toBe("support@inbox.localhost")
    expect((await detail(api, a, sent!.id)).body.data).toMatchObject({ status: "sent", subject: "Re: Opening hours" })
    expect(await balance(api, a.userId)).toBe(95)
  })

  it("reports a refused recipient as a failed message, refunded", async () => {
    const a = await fundedAccount(api, 100)
    const x = rcpt()
    relay.behaviour.refuse.set(x, 550)
    const exit = await sendVia(a.userId, { to: [x], subject: "s", text_body: "t" })
    expect(exit).toMatchObject({ _tag: "Success", value: { status: "failed", amount_tzs: 0 } })
    expect(await balance(api, a.userId)).toBe(100)
  })

  it("fails with the documented errors as values, writing nothing", async () => {
    const poor = await fundedAccount(api, 0)
    expect(failureTag(await sendVia(poor.userId, { to: [rcpt()], subject: "s", text_body: "t" }))).toBe("InsufficientBalance")
    const unverified = await createAccount(api, { emailVerified: false })
    await fund(api, unverified.userId, 100)
    expect(failureTag(await sendVia(unverified.userId, { to: [rcpt()], subject: "s", text_body: "t" }))).toBe("Forbidden")
    const a = await fundedAccount(api, 100)
    const bad = await sendVia(a.userId, { to: [rcpt()], subject: "s", text_body: "t", headers: { From: "ceo@bank.example", "X Bad": "v", "X-Ok": "a\r\nBcc: x@y.example" } })
    expect(failureTag(bad)).toBe("ValidationError")
    expect(JSON.stringify(bad)).toContain("headers.From")
    expect(JSON.stringify(bad)).toContain("headers.X Bad")
    expect(JSON.stringify(bad)).toContain("headers.X-Ok")
    expect(failureTag(await sendVia(a.userId, { to: ["not an address"], subject: "s", text_body: "t" }))).toBe("ValidationError")
    expect(failureTag(await sendVia(a.userId, { to: [rcpt()], subject: "s", text_body: "t", from_domain_id: 99_999_999 }))).toBe("NotFound")
    relay.behaviour.dataCode = 554
    expect(failureTag(await sendVia(a.userId, { to: [rcpt()], subject: "s", text_body: "t" }))).toBe("ProviderError")
    expect(await balance(api, a.userId)).toBe(100)
    expect(await movements(api, poor.userId)).toEqual([])
    expect(relay.received).toHaveLength(0)
    await expectLedgerConsistent(api)
  })
})
