/**
 * The MX benchmark's discarding peer, run as its own process: a bare smtp-server that parses
 * every message with mailparser and throws it away. Same protocol options as the MX (size
 * limit, recipient cap, no reverse lookup, 1,000 clients), no authentication, no database: the
 * ratio of the service to this peer is what the service's own work costs.
 *
 *   node bench/mx-peer.ts PORT      # prints "ready" when listening
 */
import { simpleParser } from "mailparser"
import { SMTPServer } from "smtp-server"

const port = Number(process.argv[2] ?? 0)
const server = new SMTPServer({
  name: "peer.localhost",
  size: 25 * 1024 * 1024,
  maxRecipients: 100,
  disableReverseLookup: true,
  disabledCommands: ["AUTH", "STARTTLS"],
  logger: false,
  maxClients: 1_000,
  socketTimeout: 60_000,
  onData(stream, _session, callback) {
    simpleParser(stream).then(() => callback(null, "2.0.0 OK: discarded"), (e: Error) => callback(e))
  },
})
server.listen(port, "127.0.0.1", () => console.log("ready"))
process.on("SIGTERM", () => server.close(() => process.exit(0)))
