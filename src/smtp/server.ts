/**
 * The socket side the MX and the sandbox SMTP servers share: the smtp-server options they set
 * alike, per-session state, the per-IP session cap, the DATA settings, and opening the listener
 * (a failure before it listens rejects the start; one after is a client's trouble, logged).
 */
import { Effect } from "effect"
import type { AddressInfo } from "node:net"
import type { SMTPServer, SMTPServerOptions, SMTPServerSession } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import type { AppRuntime } from "../layers.ts"
import { MAX_RECIPIENTS, smtpError } from "./common.ts"
import { prepareSpool } from "./data.ts"
import { sessionsPerIp, SmtpMemory } from "./limits.ts"
import type { SmtpTls } from "./tls.ts"

export interface OpenedServer {
  readonly port: number
  readonly close: () => Promise<void>
}

/** Options both servers set the same way that are plain values (the MX's thread gets them as they are). */
export const protocolOptions = (settings: Settings) => ({
  size: settings.maxMessageBytes,
  rejectOversized: true,
  maxRecipients: MAX_RECIPIENTS,
  disableReverseLookup: true,
  logger: false,
  socketTimeout: 60_000,
  closeTimeout: 10_000,
  maxClients: 1_000,
}) satisfies SMTPServerOptions

/** Options both servers set the same way; each adds its name, banner, commands and auth. */
export const commonServerOptions = (settings: Settings, tls: SmtpTls) => ({
  ...protocolOptions(settings),
  ...tls.options,
}) satisfies SMTPServerOptions

/**
 * What a server keeps per connection: its session state (made on first use), the per-IP cap
 * (`connect` answers onConnect, `close` forgets the connection) and the DATA settings.
 */
export const serverSessions = <S>(runtime: AppRuntime, settings: Settings, tls: SmtpTls, fresh: () => S) => {
  const states = new Map<string, S>()
  const perIp = sessionsPerIp(settings.smtpMaxSessionsPerIp)
  return {
    stateOf: (session: SMTPServerSession): S => {
      let state = states.get(session.id)
      if (!state) states.set(session.id, (state = fresh()))
      return state
    },
    connect: (session: SMTPServerSession, callback: (err?: Error | null) => void) => {
      const refused = perIp.enter(session)
      callback(refused ? smtpError(refused) : null)
    },
    /** Forgets the connection; answers its state, if it had one. */
    close: (session: SMTPServerSession): S | undefined => {
      perIp.leave(session)
      const state = states.get(session.id)
      states.delete(session.id)
      tls.forget(session)
      return state
    },
    data: {
      maxBytes: settings.maxMessageBytes,
      spoolDir: prepareSpool(settings.dataDir),
      memory: runtime.runSync(SmtpMemory.useSync((m) => m)),
    },
  }
}

/**
 * Listens on `port`; `ready` runs once listening (the sandbox records its port) before the
 * start resolves, and its failure closes the server again.
 */
export const listen = (
  runtime: AppRuntime,
  name: string,
  server: SMTPServer,
  tls: SmtpTls,
  port: number,
  ready: (port: number) => Promise<void> = () => Promise.resolve(),
): Promise<OpenedServer> =>
  new Promise((resolve, reject) => {
    const detach = tls.attach(server)
    let listening = false
    server.on("error", (err) => {
      if (!listening) return (detach(), reject(err))
      // Socket-level trouble of one client (resets, TLS probes); never fatal to the server.
      runtime.runFork(Effect.logDebug(`${name}: connection error`, String(err)))
    })
    server.listen(port, "0.0.0.0", () => {
      listening = true
      const opened = (server.server.address() as AddressInfo).port
      const close = () => new Promise<void>((done) => (detach(), server.close(() => done())))
      ready(opened).then(
        () => resolve({ port: opened, close }),
        (e) => (detach(), server.close(() => reject(e))),
      )
    })
  })
