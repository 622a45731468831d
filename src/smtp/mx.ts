/**
 * The MX server: receives mail for the platform domain and for verified receiving domains on
 * SMTP_PORT. smtp-server speaks the protocol (pipelining, SIZE, the recipient cap, the
 * early-talker guard, command limits); `session.ts` decides what to answer. A message is answered
 * 250 only after its storing transaction committed; a client that goes away before the final dot
 * leaves nothing stored and nothing charged.
 *
 * No AUTH and no STARTTLS here: an MX takes mail from anyone for our domains, and without an
 * operator-supplied certificate STARTTLS would only offer smtp-server's built-in test key.
 */
import { Cause, Effect, Exit, type ManagedRuntime } from "effect"
import type { AddressInfo } from "node:net"
import { SMTPServer, type SMTPServerSession } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import type { Listener } from "../listeners.ts"
import { type MxSessionState, newSessionState, onMessage, onRecipient, type SmtpReply } from "./session.ts"

/** Recipients per message; more get 452 and are retried by the sender in another transaction. */
export const MAX_RECIPIENTS = 100

const smtpError = (r: { code: number; message: string }) => Object.assign(new Error(r.message), { responseCode: r.code })

const LOCAL_ERROR = { code: 451, message: "4.3.0 Local error in processing, try again later" }

export const startMx = (runtime: ManagedRuntime.ManagedRuntime<any, any>, settings: Settings) =>
  new Promise<{ port: number; close: () => Promise<void> }>((resolve, reject) => {
    const states = new Map<string, MxSessionState>()
    const stateOf = (session: SMTPServerSession) => {
      let state = states.get(session.id)
      if (!state) states.set(session.id, (state = newSessionState()))
      return state
    }

    /** Runs a session step and hands its outcome to smtp-server's callback. */
    const run = <A>(effect: Effect.Effect<A, SmtpReply, any>, done: (err: Error | null, value?: A) => void) => {
      runtime.runPromiseExit(effect).then(
        (exit) => {
          if (Exit.isSuccess(exit)) return done(null, exit.value)
          const failure = exit.cause.reasons.find(Cause.isFailReason)
          if (!failure) runtime.runFork(Effect.logError("mx: step died", exit.cause))
          done(smtpError(failure ? failure.error : LOCAL_ERROR))
        },
        // Only when the runtime itself is gone (shutting down).
        () => done(smtpError(LOCAL_ERROR)),
      )
    }

    const server = new SMTPServer({
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

      onRcptTo(address, session, callback) {
        run(onRecipient(stateOf(session), address.address, session.envelope.rcptTo.map((r) => r.address)), (err) => callback(err))
      },

      onData(stream, session, callback) {
        const chunks: Array<Buffer> = []
        let kept = 0
        let gone = false
        stream.on("data", (chunk: Buffer) => {
          // Past the limit the bytes are counted by smtp-server, not kept: the answer is 552 anyway.
          if (kept <= settings.maxMessageBytes) {
            chunks.push(chunk)
            kept += chunk.length
          }
        })
        // The client left before the final dot: drop what we have, store and charge nothing.
        stream.once("error", () => {
          gone = true
          chunks.length = 0
          callback(smtpError({ code: 451, message: "4.4.2 Connection lost during DATA" }))
        })
        stream.once("end", () => {
          if (gone) return
          if (stream.sizeExceeded) {
            return callback(smtpError({ code: 552, message: `5.3.4 Message exceeds the size limit of ${settings.maxMessageBytes} bytes` }))
          }
          const delivery = {
            raw: Buffer.concat(chunks),
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            recipients: session.envelope.rcptTo.map((r) => r.address),
            client: { ip: session.remoteAddress, helo: session.hostNameAppearsAs || "" },
          }
          chunks.length = 0
          run(onMessage(delivery), (err, text) => (err ? callback(err) : callback(null, text)))
        })
      },

      onClose(session) {
        states.delete(session.id)
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
