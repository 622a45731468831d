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
 *
 * With MX_THREAD smtp-server runs on a thread of its own (./mx-threaded.ts, which says what that
 * trades) and asks the event loop's session policy for each step; without it (the default), here
 * on the event loop (`startMxOnLoop`). The answers are the same either way.
 */
import { SMTPServer } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import type { Listener } from "../listeners.ts"
import { readMessage } from "./data.ts"
import { startMxOnThread } from "./mx-threaded.ts"
import { mxServerOptions } from "./mx-options.ts"
import { mxSteps } from "./mx-steps.ts"
import { listen, type OpenedServer, serverSessions } from "./server.ts"
import { newSessionState } from "./session.ts"
import { smtpTls } from "./tls.ts"
import type { AppRuntime } from "../layers.ts"

/** The MX's protocol on a thread of its own (./mx-threaded.ts) or on the event loop (below). */
export const startMx = (runtime: AppRuntime, settings: Settings): Promise<OpenedServer> =>
  settings.mxThread
    ? startMxOnThread(runtime, settings)
    : startMxOnLoop(runtime, settings)

export const startMxOnLoop = async (runtime: AppRuntime, settings: Settings) => {
  const tls = await smtpTls(runtime, settings, "mx")
  const sessions = serverSessions(runtime, settings, tls, newSessionState)
  const { stateOf } = sessions
  const steps = mxSteps(runtime)

  const server = new SMTPServer({
    ...mxServerOptions(settings, tls),

    onConnect: sessions.connect,

    onMailFrom(_address, session, callback) {
      steps.mail(stateOf(session), callback)
    },

    onRcptTo(address, session, callback) {
      steps.rcpt(stateOf(session), address.address, callback)
    },

    onData(stream, session, callback) {
      readMessage(stream, sessions.data, callback, (message, finish) => {
        const delivery = {
          raw: message,
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          recipients: session.envelope.rcptTo.map((r) => r.address),
          // smtp-server counts the transactions of the connection that reached the end of DATA.
          reusedConnection: session.transaction > 1,
          // tls: {protocol, cipher} or null, recorded on the stored message (ESMTPS in its Received line).
          client: { ip: session.remoteAddress, helo: session.hostNameAppearsAs || "", tls: tls.facts(session) },
        }
        steps.data(stateOf(session), delivery, finish, (err, text) => (err ? callback(err) : callback(null, text)))
      })
    },

    onClose(session) {
      steps.close(sessions.close(session))
    },
  })
  return listen(runtime, "mx", server, tls, settings.smtpPort)
}

export const mxListener: Listener = { name: "mx", start: startMx }
