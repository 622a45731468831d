/**
 * The TLS facts of SMTP sessions ({protocol, cipher}, recorded on the stored message): what a
 * server's handshake hook records and its handlers read. Free of Effect, for the MX's protocol
 * thread (./mx-thread.ts) as much as for the servers on the event loop (./tls.ts).
 */
import * as tls from "node:tls"
import type { SMTPServerOptions, SMTPServerSession } from "smtp-server"

/** What a session negotiated; null when it stayed plaintext. */
export interface TlsFacts {
  readonly protocol: string
  readonly cipher: string
}

/** The TLS facts of a socket whose handshake completed. */
export const factsOf = (socket: tls.TLSSocket): TlsFacts => ({
  protocol: socket.getProtocol() ?? "unknown",
  cipher: socket.getCipher()?.name ?? "unknown",
})

/** One server's sessions' facts: `onSecure` (smtp-server's handshake hook) records them. */
export const tlsSessions = () => {
  const sessions = new Map<string, TlsFacts>()
  const onSecure: NonNullable<SMTPServerOptions["onSecure"]> = (socket, session, callback) => {
    if (socket instanceof tls.TLSSocket) sessions.set(session.id, factsOf(socket))
    callback()
  }
  return {
    onSecure,
    /** The session's TLS facts, null while it is plaintext. */
    facts: (session: SMTPServerSession): TlsFacts | null => sessions.get(session.id) ?? null,
    /** Drops a closed session's facts. */
    forget: (session: SMTPServerSession): void => void sessions.delete(session.id),
  }
}
