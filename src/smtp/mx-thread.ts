/**
 * The MX's SMTP protocol on a thread of its own (MX_THREAD; ./mx-threaded.ts says when it pays):
 * smtp-server, its sockets, TLS, the per-IP session cap and the reading of DATA (./data.ts,
 * spooling and the shared memory budget) run here, off the event loop that runs the service. Each step that needs
 * the service is asked of the host (./mx-threaded.ts), which runs the same session policy as the
 * MX on the event loop (./session.ts), and its answer ends the step: RCPT, the end of DATA (the
 * message's bytes and budget move to the host), MAIL while the transaction holds an admitted
 * recipient, and the connection's close.
 *
 * Free of Effect: this thread loads smtp-server and the few modules below, nothing else.
 */
import { parentPort, workerData } from "node:worker_threads"
import { SMTPServer } from "smtp-server"
import { turnPosts } from "../ingest/turn-posts.ts"
import { MemoryBudget, sessionsPerIp, ThreadBudget } from "./budget.ts"
import { readData } from "./data.ts"
import type { Ask, FromThread, MxThreadData, ToThread } from "./mx-thread-protocol.ts"
import { type SmtpAnswer, smtpError } from "./smtp-error.ts"
import { tlsSessions } from "./tls-facts.ts"

const host = parentPort!
const setup = workerData as MxThreadData
const memory = new ThreadBudget(new MemoryBudget(setup.memory.capacity, setup.memory.shared), setup.held)
const perIp = sessionsPerIp(setup.maxSessionsPerIp)
const tls = tlsSessions()

// What a turn sends goes in one post; a message's budget is the host's from the post on.
const posts = turnPosts<FromThread>((messages, transfer) => {
  host.postMessage(messages, transfer)
  for (const m of messages) if (m.t === "data") memory.handOver(m.read.held)
})

type Answer = Extract<ToThread, { t: "answer" }>
/** An Ask before it has its id. */
type Asking = { [T in Ask["t"]]: Omit<Extract<Ask, { t: T }>, "id"> }[Ask["t"]]
let nextId = 0
const asked = new Map<number, (a: Answer) => void>()
const ask = (m: Asking, transfer: Array<ArrayBuffer> = []) =>
  new Promise<Answer>((resolve) => {
    const id = nextId++
    asked.set(id, resolve)
    posts.send({ ...m, id } as Ask, transfer)
  })
const errorOf = (a: Answer) => (a.error ? smtpError(a.error) : null)
const log = (level: "debug" | "error", message: string, detail: unknown) => posts.send({ t: "log", level, message, detail: String(detail) })

/** Sessions whose transaction holds an admitted recipient on the host: their next MAIL lets it go. */
const holding = new Set<string>()

const server = new SMTPServer({
  ...setup.options,
  ...(setup.tls ? { key: setup.tls.key, cert: setup.tls.cert, onSecure: tls.onSecure } : {}),

  onConnect(session, callback) {
    const refused: SmtpAnswer | null = perIp.enter(session)
    callback(refused ? smtpError(refused) : null)
  },

  onMailFrom(_address, session, callback) {
    // Most transactions start with nothing held (the last one ended at its DATA): nothing to ask.
    if (!holding.delete(session.id)) return callback()
    ask({ t: "mail", sid: session.id }).then((a) => callback(errorOf(a)))
  },

  onRcptTo(address, session, callback) {
    ask({ t: "rcpt", sid: session.id, address: address.address }).then((a) => {
      const error = errorOf(a)
      if (!error) holding.add(session.id)
      callback(error)
    })
  },

  onData(stream, session, callback) {
    const data = { maxBytes: setup.maxBytes, spoolDir: setup.spoolDir, memory, spoolTag: setup.spoolTag }
    readData(stream, data, callback, (read) => {
      // The host ends the transaction once it answered (./session.ts `onMessage`).
      holding.delete(session.id)
      const transfer = read._tag === "Memory" ? [read.bytes.buffer as ArrayBuffer] : []
      ask({
        t: "data",
        sid: session.id,
        read,
        mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
        recipients: session.envelope.rcptTo.map((r) => r.address),
        // smtp-server counts the transactions of the connection that reached the end of DATA.
        reusedConnection: session.transaction > 1,
        client: { ip: session.remoteAddress, helo: session.hostNameAppearsAs || "", tls: tls.facts(session) },
      }, transfer).then((a) => {
        const error = errorOf(a)
        error ? callback(error) : callback(null, a.text)
      })
    })
  },

  onClose(session) {
    perIp.leave(session)
    tls.forget(session)
    holding.delete(session.id)
    posts.send({ t: "close", sid: session.id })
  },
})

host.on("message", (messages: ReadonlyArray<ToThread>) => {
  for (const m of messages) {
    if (m.t === "answer") {
      const resolve = asked.get(m.id)
      asked.delete(m.id)
      resolve?.(m)
    } else if (m.t === "tls") {
      server.updateSecureContext({ key: m.tls.key, cert: m.tls.cert })
    } else if (m.t === "stop") {
      server.close(() => host.postMessage([{ t: "closed" }] satisfies Array<FromThread>))
    }
  }
})

let listening = false
server.on("error", (err) => {
  if (!listening) return host.postMessage([{ t: "failed", message: String(err) }] satisfies Array<FromThread>)
  // Socket-level trouble of one client (resets, TLS probes); never fatal to the server.
  log("debug", "mx: connection error", err)
})
server.listen({ port: setup.port, host: "0.0.0.0", reusePort: setup.reusePort }, () => {
  listening = true
  const port = (server.server.address() as { port: number }).port
  host.postMessage([{ t: "ready", port }] satisfies Array<FromThread>)
})
