/**
 * The MX server: receives mail for the platform domain and for verified receiving domains on
 * SMTP_PORT. smtp-server speaks the protocol (pipelining, SIZE, the recipient cap, the
 * early-talker guard, command limits); `session.ts` decides what to answer. A message is answered
 * 250 only after its storing transaction committed; a client that goes away before the final dot
 * leaves nothing stored and nothing charged. At most SMTP_MAX_SESSIONS_PER_IP sessions per client
 * address; message bytes live within the process's SMTP_MEMORY_BYTES (./data.ts).
 *
 * No AUTH here: an MX takes mail from anyone for our domains. STARTTLS is offered with the
 * certificate of tls.ts (none in production without TLS_CERT_FILE / TLS_KEY_FILE).
 */
import { Effect } from "effect"
import type { AddressInfo } from "node:net"
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import type { Listener } from "../listeners.ts"
import { MAX_RECIPIENTS, smtpError, stepRunner } from "./common.ts"
import { prepareSpool, readMessage } from "./data.ts"
import { sessionsPerIp, SmtpMemory } from "./limits.ts"
import { endTransaction, type MxSessionState, newSessionState, onMailFrom, onMessage, onRecipient } from "./session.ts"
import { type SmtpTls, smtpTls } from "./tls.ts"
import type { AppRuntime } from "../layers.ts"

/** The MX's smtp-server options, apart from its handlers. */
export const mxServerOptions = (settings: Settings, tls: SmtpTls): SMTPServerOptions => ({
  name: settings.mxHost,
  banner: "inbound mail",
  size: settings.maxMessageBytes,
  rejectOversized: true,
  maxRecipients: MAX_RECIPIENTS,
  disableReverseLookup: true,
  disabledCommands: tls.enabled ? ["AUTH"] : ["AUTH", "STARTTLS"],
  ...tls.options,
  logger: false,
  socketTimeout: 60_000,
  closeTimeout: 10_000,
  maxClients: 1_000,
})

export const startMx = async (runtime: AppRuntime, settings: Settings) => {
  const tls = await smtpTls(runtime, settings, "mx")
  return new Promise<{ port: number; close: () => Promise<void> }>((resolve, reject) => {
    const states = new Map<string, MxSessionState>()
    const stateOf = (session: SMTPServerSession) => {
      let state = states.get(session.id)
      if (!state) states.set(session.id, (state = newSessionState()))
      return state
    }
    const run = stepRunner(runtime, "mx")
    const sessions = sessionsPerIp(settings.smtpMaxSessionsPerIp)
    const data = { maxBytes: settings.maxMessageBytes, spoolDir: prepareSpool(settings.dataDir), memory: runtime.runSync(SmtpMemory.useSync((m) => m)) }

    const server = new SMTPServer({
      ...mxServerOptions(settings, tls),

      onConnect(session, callback) {
        const refused = sessions.enter(session)
        callback(refused ? smtpError(refused) : null)
      },

      onMailFrom(_address, session, callback) {
        const state = stateOf(session)
        // Most transactions start with nothing held (the last one ended at its DATA): no step to run.
        if (state.envelope.held.size === 0 && state.envelope.destinations.size === 0) return callback()
        run(onMailFrom(state), (err) => callback(err))
      },

      onRcptTo(address, session, callback) {
        run(onRecipient(stateOf(session), address.address), (err) => callback(err))
      },

      onData(stream, session, callback) {
        readMessage(stream, data, callback, (message, finish) => {
          const delivery = {
            raw: message,
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            recipients: session.envelope.rcptTo.map((r) => r.address),
            // tls: {protocol, cipher} or null, recorded on the stored message (ESMTPS in its Received line).
            client: { ip: session.remoteAddress, helo: session.hostNameAppearsAs || "", tls: tls.facts(session) },
          }
          run(onMessage(stateOf(session), delivery), (err, text) => {
            finish()
            err ? callback(err) : callback(null, text)
          })
        })
      },

      onClose(session) {
        sessions.leave(session)
        const state = states.get(session.id)
        states.delete(session.id)
        tls.forget(session)
        if (state) runtime.runFork(endTransaction(state))
      },
    })
    const detach = tls.attach(server)

    let listening = false
    server.on("error", (err) => {
      if (!listening) return (detach(), reject(err))
      // Socket-level trouble of one client (resets, TLS probes); never fatal to the server.
      runtime.runFork(Effect.logDebug("mx: connection error", String(err)))
    })
    server.listen(settings.smtpPort, "0.0.0.0", () => {
      listening = true
      resolve({
        port: (server.server.address() as AddressInfo).port,
        close: () => new Promise<void>((done) => (detach(), server.close(() => done()))),
      })
    })
  })
}

export const mxListener: Listener = { name: "mx", start: startMx }
