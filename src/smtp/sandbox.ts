/**
 * The sandbox capture server on SANDBOX_SMTP_PORT: an app points its SMTP settings here during
 * development and every message it sends is stored for the account (GET /api/sandbox/messages)
 * instead of being delivered. smtp-server speaks the protocol (AUTH PLAIN/LOGIN, pipelining,
 * SIZE, the recipient cap, the early-talker guard, command limits); `sandbox-session.ts` decides
 * what to answer.
 *
 * AUTH is required before MAIL: the username/password is the account's SMTP login or a sandbox
 * credential (client_id/client_secret). Any recipient is taken, since nothing leaves. A message is
 * answered 250 only after it is stored; a client that goes away before the final dot leaves
 * nothing behind and uses none of the month's allowance. Capture never touches the wallet.
 *
 * TLS (tls.ts): STARTTLS on SANDBOX_SMTP_PORT and implicit TLS on SANDBOX_SMTPS_PORT (a second
 * listener with the same session policy). AUTH stays allowed without TLS (allowInsecureAuth), as
 * SPEC.md's clients expect; the credentials only ever capture.
 *
 * Limits as on the MX: SMTP_MAX_SESSIONS_PER_IP sessions per client address (per listener), message
 * bytes within the process's SMTP_MEMORY_BYTES (large messages spool to DATA_DIR, ./data.ts).
 */
import { SMTPServer, type SMTPServerOptions } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import { SandboxCredentials } from "../../effects/sandbox/credentials.ts"
import type { Listener } from "../listeners.ts"
import { stepRunner } from "./common.ts"
import { readMessage } from "./data.ts"
import { newSandboxSessionState, onAuth, onMailFrom, onMessage, onRecipient } from "./sandbox-session.ts"
import { commonServerOptions, listen, serverSessions } from "./server.ts"
import { type SmtpTls, smtpTls } from "./tls.ts"
import type { AppRuntime } from "../layers.ts"

/** The sandbox's smtp-server options, apart from its handlers. */
export const sandboxServerOptions = (settings: Settings, tls: SmtpTls, implicitTls: boolean): SMTPServerOptions => ({
  name: settings.sandboxSmtpHost,
  banner: "sandbox: mail is captured, never delivered",
  disabledCommands: tls.enabled && !implicitTls ? [] : ["STARTTLS"],
  ...commonServerOptions(settings, tls),
  secure: implicitTls,
  authMethods: ["PLAIN", "LOGIN"],
  allowInsecureAuth: true,
  authRequiredMessage: "5.7.0 Authentication required",
})

/** `implicitTls`: the SANDBOX_SMTPS_PORT listener (TLS from the first byte, no STARTTLS). */
export const startSandboxSmtp = async (runtime: AppRuntime, settings: Settings, implicitTls = false) => {
  const tls = await smtpTls(runtime, settings, implicitTls ? "sandbox_smtps" : "sandbox", implicitTls ? "not listening on SANDBOX_SMTPS_PORT" : undefined)
  if (implicitTls && !tls.enabled) return { port: 0, close: () => Promise.resolve() }
  const sessions = serverSessions(runtime, settings, tls, newSandboxSessionState)
  const { stateOf } = sessions
  const run = stepRunner(runtime, "sandbox")

  const server = new SMTPServer({
    ...sandboxServerOptions(settings, tls, implicitTls),

    onConnect: sessions.connect,

    onAuth(auth, session, callback) {
      run(onAuth(stateOf(session), auth.username ?? "", auth.password ?? ""), (err, login) =>
        err ? callback(err) : callback(null, { user: login!.username }))
    },

    onMailFrom(_address, session, callback) {
      run(onMailFrom(stateOf(session)), (err) => callback(err))
    },

    onRcptTo(_address, session, callback) {
      run(onRecipient(stateOf(session)), (err) => callback(err))
    },

    onData(stream, session, callback) {
      readMessage(stream, sessions.data, callback, (raw, finish) => {
        const submission = {
          raw,
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          recipients: session.envelope.rcptTo.map((r) => r.address),
          // {protocol, cipher} or null, for the captured message (the sandbox records it).
          tls: tls.facts(session),
        }
        run(onMessage(stateOf(session), submission), (err, text) => {
          finish()
          err ? callback(err) : callback(null, text)
        })
      })
    },

    onClose(session) {
      sessions.close(session)
    },
  })
  return listen(
    runtime,
    "sandbox",
    server,
    tls,
    implicitTls ? settings.sandboxSmtpsPort : settings.sandboxSmtpPort,
    // The settings API names the plaintext/STARTTLS port.
    (port) => (implicitTls ? Promise.resolve() : runtime.runPromise(SandboxCredentials.use((c) => c.listening(port)))),
  )
}

export const sandboxListener: Listener = { name: "sandbox", start: (runtime, settings) => startSandboxSmtp(runtime, settings) }
export const sandboxSmtpsListener: Listener = { name: "sandbox_smtps", start: (runtime, settings) => startSandboxSmtp(runtime, settings, true) }
