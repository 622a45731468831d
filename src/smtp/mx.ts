/**
 * The MX server: receives mail for the platform domain and for verified receiving domains on
 * SMTP_PORT. smtp-server speaks the protocol (pipelining, SIZE, the recipient cap, the
 * early-talker guard, command limits); `session.ts` decides what to answer. A message is answered
 * 250 only after its storing transaction committed; a client that goes away before the final dot
 * leaves nothing stored and nothing charged.
 *
 * No AUTH here: an MX takes mail from anyone for our domains. STARTTLS is offered with the
 * certificate of tls.ts (none in production without TLS_CERT_FILE / TLS_KEY_FILE).
 */
import { Effect, type ManagedRuntime } from "effect"
import type { AddressInfo } from "node:net"
import { SMTPServer, type SMTPServerSession } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import type { Listener } from "../listeners.ts"
import { readMessage, stepRunner } from "./common.ts"
import { type MxSessionState, newSessionState, onMessage, onRecipient } from "./session.ts"
import { smtpTls } from "./tls.ts"

/** Recipients per message; more get 452 and are retried by the sender in another transaction. */
export const MAX_RECIPIENTS = 100

export const startMx = async (runtime: ManagedRuntime.ManagedRuntime<any, any>, settings: Settings) => {
  const tls = await smtpTls(runtime, settings, "mx")
  return new Promise<{ port: number; close: () => Promise<void> }>((resolve, reject) => {
    const states = new Map<string, MxSessionState>()
    const stateOf = (session: SMTPServerSession) => {
      let state = states.get(session.id)
      if (!state) states.set(session.id, (state = newSessionState()))
      return state
    }

    /** Runs a session step and hands its outcome to smtp-server's callback. */
    const run = stepRunner(runtime, "mx")

    const server = new SMTPServer({
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

      onRcptTo(address, session, callback) {
        run(onRecipient(stateOf(session), address.address, session.envelope.rcptTo.map((r) => r.address)), (err) => callback(err))
      },

      onData(stream, session, callback) {
        readMessage(stream, settings.maxMessageBytes, callback, (raw) => {
          const delivery = {
            raw,
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            recipients: session.envelope.rcptTo.map((r) => r.address),
            client: { ip: session.remoteAddress, helo: session.hostNameAppearsAs || "" },
            // {protocol, cipher} or null, for the stored message (ingest records it).
            tls: tls.facts(session),
          }
          run(onMessage(delivery), (err, text) => (err ? callback(err) : callback(null, text)))
        })
      },

      onClose(session) {
        states.delete(session.id)
        tls.forget(session)
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
