/**
 * The sandbox capture session policy, free of sockets: what AUTH, MAIL FROM, RCPT TO and the end
 * of DATA answer. `src/smtp/sandbox.ts` feeds smtp-server's callbacks through here; tests call it
 * directly. The reply table below is where sandbox service errors become SMTP replies.
 */
import { Effect } from "effect"
import { type SandboxLogin, SandboxCredentials } from "../../effects/sandbox/credentials.ts"
import { Sandbox, type Submission } from "../../effects/sandbox/service.ts"
import { commonReply, reply, replyingWith, type SmtpReply } from "./common.ts"

/** Failed AUTH attempts a connection may make before it is dropped with 421. */
export const MAX_AUTH_FAILURES = 5

/** Per-connection state kept by the server between commands. */
export interface SandboxSessionState {
  login: SandboxLogin | null
  authFailures: number
  /** The month's allowance was checked for the current transaction (reset at MAIL FROM). */
  admitted: boolean
}

export const newSandboxSessionState = (): SandboxSessionState => ({ login: null, authFailures: 0, admitted: false })

/** Service error → SMTP reply. Anything not listed is a local, temporary failure. */
export const toSandboxReply = (e: { readonly _tag: string; readonly message?: string }): SmtpReply => {
  switch (e._tag) {
    case "Unauthorized":
      return reply(535, "5.7.8 Authentication credentials invalid")
    case "AccountDisabled":
      return reply(535, "5.7.8 This account is disabled")
    case "LimitReached":
      // Temporary on purpose: the allowance renews with the month, so a retry later can succeed.
      return reply(452, `4.2.2 Sandbox capture limit reached: ${e.message ?? "monthly allowance used up"}`)
    default:
      return commonReply(e)
  }
}

const replying = replyingWith("sandbox", toSandboxReply)

/** A login that no longer holds (revoked, password regenerated, account disabled) cannot go on. */
const stillSignedIn = (state: SandboxSessionState) =>
  Effect.gen(function*() {
    const login = state.login
    if (!login) return yield* reply(530, "5.7.0 Authentication required")
    const credentials = yield* SandboxCredentials
    const checked = yield* Effect.result(replying(credentials.recheck(login)))
    if (checked._tag === "Failure") {
      return yield* (checked.failure.code === 535
        ? reply(530, "5.7.0 Authentication required: the credential was revoked or its password changed")
        : checked.failure)
    }
    return login
  })

/**
 * AUTH PLAIN / LOGIN. A wrong secret is 535 5.7.8; the MAX_AUTH_FAILURES-th on one connection is
 * 421 and the connection is closed (the secrets are 128+ random bits; this bounds the noise).
 */
export const onAuth = (state: SandboxSessionState, username: string, password: string) =>
  Effect.gen(function*() {
    const credentials = yield* SandboxCredentials
    const result = yield* Effect.result(replying(credentials.authenticate(username, password)))
    if (result._tag === "Failure") {
      if (result.failure.code === 535 && ++state.authFailures >= MAX_AUTH_FAILURES) {
        return yield* reply(421, "4.7.0 Too many failed authentication attempts, closing connection")
      }
      return yield* result.failure
    }
    state.login = result.success
    return result.success
  })

/** MAIL FROM: the login still holds and may submit (`smtp` scope). */
export const onMailFrom = (state: SandboxSessionState) =>
  Effect.gen(function*() {
    state.admitted = false
    const login = yield* stillSignedIn(state)
    if (!login.full && !login.scopes.has("smtp")) {
      return yield* reply(550, "5.7.1 This credential may only sign in (scope smtp:verify); it cannot submit mail")
    }
  })

/**
 * RCPT TO: any address is taken (nothing is delivered) while the month's allowance lasts; the
 * allowance is looked at once per transaction, and taken for real at the end of DATA.
 */
export const onRecipient = (state: SandboxSessionState) =>
  Effect.gen(function*() {
    if (state.admitted) return
    if (!state.login) return yield* reply(530, "5.7.0 Authentication required")
    const sandbox = yield* Sandbox
    yield* replying(sandbox.admit(state.login.userId))
    state.admitted = true
  })

/** End of DATA: captures the message for the login's account; the 250 names its id. */
export const onMessage = (state: SandboxSessionState, submission: Submission) =>
  Effect.gen(function*() {
    const login = yield* stillSignedIn(state)
    const sandbox = yield* Sandbox
    const id = yield* replying(sandbox.capture(login.userId, login.credentialId, submission))
    return `2.0.0 OK: captured as ${id}`
  })
