/**
 * Operator CLI commands on accounts: disable-account / enable-account take effect on the next
 * request for keys and tokens alike; verify-identity marks what the account has as verified.
 * Commands run as effects on the test app's runtime, as `npm run admin` runs them on its own.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Authenticator } from "../../effects/auth/service.ts"
import { commands } from "../../src/admin/index.ts"
import { createAccount } from "../support/accounts.ts"
import { type AuthTestApp, freshPhone, makeAuthTestApp, register } from "../support/auth.ts"

let t: AuthTestApp
beforeAll(async () => {
  t = await makeAuthTestApp()
})
afterAll(() => t.api.stop())

const command = (name: string) => commands.find((c) => c.name === name)!
const run = (name: string, ...args: Array<string>) => t.api.run(Effect.result(command(name).run(args, {}) as Effect.Effect<any, any>))
const keyStatus = async (apiKey: string) => {
  const r = await t.api.run(Effect.result(Effect.gen(function*() {
    const auth = yield* Authenticator
    return yield* auth.authenticate({ apiKey }, "key")
  })))
  return r._tag === "Success" ? "ok" : (r.failure as { _tag: string })._tag
}

describe("operator commands", () => {
  it("are registered with usage lines", () => {
    for (const name of ["accounts", "disable-account", "enable-account", "verify-identity"]) {
      expect(command(name)?.usage).toContain(name)
    }
  })

  it("disable-account stops keys and tokens at once; enable-account restores them", async () => {
    const acc = await createAccount(t.api)
    expect(await keyStatus(acc.apiKey)).toBe("ok")
    const disabled = await run("disable-account", String(acc.userId))
    expect(disabled._tag).toBe("Success")
    expect(await keyStatus(acc.apiKey)).toBe("AccountDisabled")
    const me = await t.api.call("GET", "/api/auth/me", { token: acc.token })
    expect(me.status).toBe(403)
    expect(me.body.errors[0].code).toBe("ACCOUNT_DISABLED")
    // Disabling twice keeps the first timestamp.
    expect((await run("disable-account", String(acc.userId)))._tag).toBe("Success")
    expect((await run("enable-account", String(acc.userId)))._tag).toBe("Success")
    expect(await keyStatus(acc.apiKey)).toBe("ok")
    expect((await t.api.call("GET", "/api/auth/me", { token: acc.token })).status).toBe(200)
  })

  it("verify-identity marks the email and phone the account has", async () => {
    const phone = freshPhone()
    const a = await register(t.api, { phone_number: phone })
    const out = await run("verify-identity", String(a.user.id))
    expect(out).toMatchObject({ _tag: "Success", success: { email_verified: true, phone_verified: true } })
    const emailOnly = await register(t.api)
    const only = await run("verify-identity", String(emailOnly.user.id))
    expect(only).toMatchObject({ success: { email_verified: true, phone_verified: false, phone_number: null } })
    // The guard other capabilities use now passes.
    await t.api.run(Authenticator.use((auth) => auth.requireVerifiedIdentity(emailOnly.user.id, "address")))
  })

  it("answer NOT_FOUND for an unknown id and a validation error for a bad one", async () => {
    for (const name of ["disable-account", "enable-account", "verify-identity"]) {
      expect(await run(name, "999999")).toMatchObject({ _tag: "Failure", failure: { _tag: "NotFound" } })
      expect(await run(name, "abc")).toMatchObject({ _tag: "Failure", failure: { _tag: "ValidationError" } })
      expect(await run(name)).toMatchObject({ _tag: "Failure", failure: { _tag: "ValidationError" } })
    }
  })
})

describe("verified identity guard", () => {
  it("refuses unverified accounts with 403 FORBIDDEN and accepts a verified email or phone", async () => {
    const a = await register(t.api)
    const guard = (purpose: "address" | "outbound") =>
      t.api.run(Effect.result(Authenticator.use((auth) => auth.requireVerifiedIdentity(a.user.id, purpose))))
    expect(await guard("address")).toMatchObject({ _tag: "Failure", failure: { _tag: "Forbidden" } })
    await t.api.call("POST", "/api/auth/email/verify", { body: { token: t.outbox.lastToken(a.email) } })
    expect((await guard("address"))._tag).toBe("Success")
    expect((await guard("outbound"))._tag).toBe("Success")
  })
})
