/**
 * The MX server: receives mail for the platform domain and for verified receiving domains on
 * SMTP_PORT. smtp-server speaks the protocol (pipelining, SIZE, the recipient cap, the
 * early-talker guard, command limits); `session.ts` decides what to answer. A message is answered
 * 250 only after its storing transaction committed; a client that goes away before the final dot
 * leaves nothing stored and nothing charged. At most SMTP_MAX_SESSIONS_PER_IP sessions per client
 * address; message bytes live within the process's SMTP_MEMORY_BYTES (./data.ts).
 *
 * No AUTH and no STARTTLS here yet: an MX takes mail from anyone for our domains. The server's
 * options are built in `mxServerOptions` only, the place TLS settings will join.
 */
import { Effect, type ManagedRuntime } from "effect"
import type { AddressInfo } from "node:net"
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import type { Listener } from "../listeners.ts"
import { MAX_RECIPIENTS, smtpError, stepRunner } from "./common.ts"
import { prepareSpool, readMessage } from "./data.ts"
import { sessionsPerIp, SmtpMemory } from "./limits.ts"
import { endTransaction, type MxSessionState, newSessionState, onMailFrom, onMessage, onRecipient } from "./session.ts"

/** The MX's smtp-server options, apart from its handlers. */
export const mxServerOptions = (settings: Settings): SMTPServerOptions => ({
  name: settings.mxHost,
  banner: "inbound mail",
  size: settings.maxMessageBytes,
  rejectOversized: true,
  maxRecipients: MAX_RECIPIENTS,
  disableReverseLookup: true,
  disabledCommands: ["AUTH", "STARTTLS"],
  logger: false,
  socketTimeout: 60_000,
  closeTimeout: 10_000,
  maxClients: 1_000,
})

export const startMx = (runtime: ManagedRuntime.ManagedRuntime<any, any>, settings: Settings) =>
  new Promise<{ port: number; close: () => Promise<void> }>((resolve, reject) => {
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
      ...mxServerOptions(settings),

      onConnect(session, callback) {
        const refused = sessions.enter(session)
        callback(refused ? smtpError(refused) : null)
      },

      onMailFrom(_address, session, callback) {
        const state = stateOf(session)
        // Most transactions start with nothing held (the last one ended at its DATA): no step to run.
        if (state.envelope.held.size === 0 && state.envelope.routes.size === 0) return callback()
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
            client: { ip: session.remoteAddress, helo: session.hostNameAppearsAs || "" },
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
        if (state) runtime.runFork(endTransaction(state))
      },
    })

    let listening = false
    server.on("error", (err) => {
      if (!listening) return reject(err)
      // Socket-level trouble of one client (resets, TLS probes); never fatal to the server.
      runtime.runFork(Effect.logDebug("mx: connection error", String(err)))
    })
    server.listen(settings.smtpPort, "0.0.0.0", () => {
      listening = true
      resolve({
        port: (server.server.address() as AddressInfo).port,
        close: () => new Promise<void>((done) => server.close(() => done())),
      })
    })
  })

export const mxListener: Listener = { name: "mx", start: startMx }
