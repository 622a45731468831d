/** The sandbox session policy without sockets: what AUTH, MAIL, RCPT and the end of DATA answer, and why. */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AccountDisabled, Forbidden, InternalError, LimitReached, Unauthorized } from "../../effects/errors.ts"
import { SandboxLimits } from "../../effects/sandbox/limits.ts"
import { SmtpReply } from "../../src/smtp/common.ts"
import {
  MAX_AUTH_FAILURES,
  newSandboxSessionState,
  onAuth,
  onMailFrom,
  onMessage,
  onRecipient,
  type SandboxSessionState,
  toSandboxReply,
} from "../../src/smtp/sandbox-session.ts"
import { createAccount } from "../support/accounts.ts"
import { plainMessage } from "../support/inbound.ts"
import { capturedCount, createCredential, type SandboxTestApp, smtpLogin, startSandboxApp } from "./support.ts"

let app: SandboxTestApp
beforeAll(async () => {
  app = await startSandboxApp({ infrastructure: Layer.succeed(SandboxLimits, { monthlyCaptures: 1 }) })
})
afterAll(() => app.stop())

const step = <A>(effect: Effect.Effect<A, SmtpReply, any>) => app.api.run(Effect.result(effect))
const failed = async <A>(effect: Effect.Effect<A, SmtpReply, any>) => {
  const r = await step(effect)
  if (r._tag === "Success") throw new Error("expected a refusal")
  return `${r.failure.code} ${r.failure.message}`
}

describe("the reply table", () => {
  it("maps each service error to its SMTP reply, anything else to 451 4.3.0", () => {
    const cases: Array<[{ readonly _tag: string; readonly message?: string }, number, string]> = [
      [new Unauthorized({ message: "x" }), 535, "5.7.8"],
      [new AccountDisabled({ message: "x" }), 535, "5.7.8"],
      [new LimitReached({ message: "x" }), 452, "4.2.2"],
      [new SmtpReply({ code: 421, message: "4.7.0 bye" }), 421, "4.7.0"],
      [new Forbidden({ message: "x" }), 451, "4.3.0"],
      [new InternalError({ message: "x" }), 451, "4.3.0"],
    ]
    for (const [error, code, enhanced] of cases) {
      const r = toSandboxReply(error)
      expect([r.code, r.message.slice(0, 5)], error._tag).toEqual([code, enhanced])
    }
  })
})

describe("a session", () => {
  it("counts failed AUTHs per connection and closes on the fifth; a success keeps the login", async () => {
    const { apiKey } = await createAccount(app.api)
    const login = await smtpLogin(app.api, apiKey)
    const state = newSandboxSessionState()
    const answers: Array<string> = []
    for (let i = 0; i < MAX_AUTH_FAILURES; i++) answers.push(await failed(onAuth(state, login.username, "wrong")))
    expect(answers.map((a) => a.slice(0, 9))).toEqual([...Array(MAX_AUTH_FAILURES - 1).fill("535 5.7.8"), "421 4.7.0"])
    const fresh = newSandboxSessionState()
    const ok = await step(onAuth(fresh, login.username, login.password!))
    expect(ok._tag).toBe("Success")
    expect(fresh.login).toMatchObject({ username: login.username, credentialId: null, full: true })
  })

  it("refuses MAIL and RCPT without a login (530), and takes the month's allowance only at the end of DATA", async () => {
    const bare = newSandboxSessionState()
    expect(await failed(onMailFrom(bare))).toMatch(/^530 5\.7\.0/)
    expect(await failed(onRecipient(bare))).toMatch(/^530 5\.7\.0/)

    const { userId, apiKey } = await createAccount(app.api)
    const c = await createCredential(app.api, apiKey, { scopes: "smtp" })
    const state: SandboxSessionState = newSandboxSessionState()
    expect((await step(onAuth(state, c.client_id, c.client_secret)))._tag).toBe("Success")
    expect((await step(onMailFrom(state)))._tag).toBe("Success")
    expect((await step(onRecipient(state)))._tag).toBe("Success")
    expect(state.admitted).toBe(true)
    const submission = { raw: Buffer.from(plainMessage()), mailFrom: "a@app.example", recipients: ["b@c.example"] }
    const done = await step(onMessage(state, submission))
    expect(done._tag === "Success" && done.success).toMatch(/^2\.0\.0 OK: captured as \d+$/)
    // The allowance (1 here) is used up: the next transaction is refused at RCPT.
    expect((await step(onMailFrom(state)))._tag).toBe("Success")
    expect(state.admitted).toBe(false)
    expect(await failed(onRecipient(state))).toMatch(/^452 4\.2\.2 /)
    expect(await capturedCount(app.api, userId)).toBe(1)
  })
})
