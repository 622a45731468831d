/**
 * The MX with its SMTP protocol on a thread of its own (./mx-thread.ts; MX_THREAD, off by
 * default). This side, on the event loop, runs each step the thread asks for through the MX's
 * session policy (./session.ts), exactly as the MX on the event loop does from smtp-server's
 * callbacks (./mx.ts), and posts the answer back.
 *
 * What stays here: the session states (the money held at RCPT), the certificate's loading and
 * SIGHUP reloads (handed to the thread), logging, and the thread's life. A thread that dies is
 * logged and started again on the same port after RESTART_MS; its clients lose their
 * connections (and retry, as for any dropped connection); the holds of their transactions, the
 * memory budget it held and the spool files it was writing are given back. Stopping closes the
 * thread's server (sessions in flight end within smtp-server's closeTimeout, their steps still
 * answered here) before the thread ends.
 *
 * What it trades, on two cores with PostgreSQL (interleaved pairs, bench/REPORT.md, MX ingest,
 * forty-second and forty-third sessions): one message per connection +4 % on a fast machine and
 * +8 to +17 % on a slow one (where the event loop is the bottleneck), but 2 KiB over reused
 * connections −3 to −5 % (each answer wakes the thread, and there is little protocol work to take
 * off the loop). 100 KiB mail: −10 % on a fast machine at +40–55 MiB peak RSS before its buffers
 * and young generation were seen to (./data.ts `freeFinalRead`, `THREAD_SEMI_SPACE_MB`); since,
 * on a slow machine, +6 % at +15–20 MiB (238–254 against 223–235 MiB). So it is off by default:
 * for an MX taking mostly small mail one message per connection on a host whose event loop is the
 * bottleneck.
 */
import { Effect } from "effect"
import cluster from "node:cluster"
import * as fs from "node:fs"
import * as path from "node:path"
import { Worker } from "node:worker_threads"
import type { Settings } from "../../effects/config.ts"
import type { AppRuntime } from "../layers.ts"
import { siblingModule } from "../module-url.ts"
import { withYoungGeneration } from "../worker-heap.ts"
import { turnPosts, type TurnPosts } from "../ingest/turn-posts.ts"
import { takeBackHeld } from "./budget.ts"
import { openRead, prepareSpool, spoolPrefix } from "./data.ts"
import { SmtpMemory } from "./limits.ts"
import { mxPlainOptions } from "./mx-options.ts"
import { mxSteps } from "./mx-steps.ts"
import type { FromThread, MxThreadData, ThreadTls, ToThread } from "./mx-thread-protocol.ts"
import { type OpenedServer, protocolOptions } from "./server.ts"
import { type MxSessionState, newSessionState } from "./session.ts"
import { smtpTls } from "./tls.ts"

/**
 * The thread's semi-spaces, in MB. It allocates few objects (smtp-server's sessions and their
 * replies), so the process's young generation (8 MB semi-spaces on PostgreSQL, src/process.ts)
 * was ~14 MiB of resident memory it did not use (../worker-heap.ts).
 */
const THREAD_SEMI_SPACE_MB = 1
/** How long after a thread died the next one starts (a thread that fails at once does not spin). */
export const RESTART_MS = 500
/** How long past smtp-server's closeTimeout a stopping thread may take before it is ended. */
const STOP_GRACE_MS = 5_000

interface Thread {
  readonly worker: Worker
  readonly posts: TurnPosts<ToThread>
  /** The sessions of this thread that reached a step, by smtp-server's session id. */
  readonly states: Map<string, MxSessionState>
  readonly held: SharedArrayBuffer
  /** Its spool files' names start with this; those the event loop holds are in `files`. */
  readonly spoolTag: string
  readonly files: Set<string>
  ready: boolean
  /** Set while stopping: called when the thread's server has closed, or the thread is gone. */
  closed?: () => void
}

export interface ThreadedMx extends OpenedServer {
  /** The thread listening now; undefined while one starts (tests end it to see it replaced). */
  readonly thread: () => Worker | undefined
}

const stateOf = (thread: Thread, sid: string): MxSessionState => {
  let state = thread.states.get(sid)
  if (!state) thread.states.set(sid, (state = newSessionState()))
  return state
}

export const startMxOnThread = async (runtime: AppRuntime, settings: Settings): Promise<ThreadedMx> => {
  const tls = await smtpTls(runtime, settings, "mx")
  let certificate: ThreadTls | null = tls.enabled ? { key: String(tls.options.key), cert: String(tls.options.cert) } : null
  const memory = runtime.runSync(SmtpMemory.useSync((m) => m))
  const spoolDir = prepareSpool(settings.dataDir)
  const steps = mxSteps(runtime)
  const log = (effect: Effect.Effect<void>) => void runtime.runFork(effect)

  let current: Thread | undefined
  let stopping = false
  let port = settings.smtpPort
  /** Threads started so far (each names its spool files by its number). */
  let started = 0

  const answer = (thread: Thread, id: number) => (err: Error | null, text?: string) =>
    thread.posts.send(
      err
        ? { t: "answer", id, error: { code: (err as Error & { responseCode?: number }).responseCode ?? 451, message: err.message } }
        : { t: "answer", id, ...(text === undefined ? {} : { text }) },
    )

  const step = (thread: Thread, m: FromThread) => {
    switch (m.t) {
      case "mail":
        return steps.mail(stateOf(thread, m.sid), answer(thread, m.id))
      case "rcpt":
        return steps.rcpt(stateOf(thread, m.sid), m.address, answer(thread, m.id))
      case "data": {
        const { message, finish } = openRead(m.read, memory)
        const delivery = { raw: message, mailFrom: m.mailFrom, recipients: [...m.recipients], reusedConnection: m.reusedConnection, client: m.client }
        const file = m.read._tag === "File" ? m.read.path : undefined
        if (file) thread.files.add(file)
        const finished = () => {
          if (file) thread.files.delete(file)
          finish()
        }
        return steps.data(stateOf(thread, m.sid), delivery, finished, answer(thread, m.id))
      }
      case "close": {
        const state = thread.states.get(m.sid)
        thread.states.delete(m.sid)
        return steps.close(state)
      }
      case "log":
        return log(m.level === "error" ? Effect.logError(m.message, m.detail) : Effect.logDebug(m.message, m.detail))
      case "closed":
        return thread.closed?.()
    }
  }

  /** A thread is gone: what its sessions held goes back; unless stopping, another takes its place. */
  const gone = (thread: Thread, code: number) => {
    thread.posts.clear()
    memory.release(takeBackHeld(thread.held))
    removeSpooled(thread)
    for (const state of thread.states.values()) steps.close(state)
    thread.states.clear()
    thread.closed?.()
    if (current !== thread) return
    current = undefined
    if (stopping || !thread.ready) return
    log(Effect.logError(`mx: protocol thread exited with code ${code}; starting another in ${RESTART_MS} ms`))
    setTimeout(restart, RESTART_MS)
  }

  /** The spool files a dead thread was writing (not those it handed over, still being stored). */
  const removeSpooled = (thread: Thread) => {
    const prefix = spoolPrefix(thread.spoolTag)
    for (const name of fs.readdirSync(spoolDir)) {
      const file = path.join(spoolDir, name)
      if (name.startsWith(prefix) && !thread.files.has(file)) fs.rmSync(file, { force: true })
    }
  }

  const restart = () => {
    if (stopping) return
    open().catch((e) => {
      log(Effect.logError(`mx: protocol thread could not start again; retrying in ${RESTART_MS} ms`, String(e)))
      setTimeout(restart, RESTART_MS)
    })
  }

  /** Starts a thread listening on `port`; resolves once it listens, rejects if it cannot. */
  const open = () =>
    new Promise<number>((resolve, reject) => {
      const held = new SharedArrayBuffer(8)
      const spoolTag = `mx${++started}-`
      const workerData: MxThreadData = {
        port,
        reusePort: cluster.isWorker === true,
        options: mxPlainOptions(settings, certificate !== null),
        tls: certificate,
        maxSessionsPerIp: settings.smtpMaxSessionsPerIp,
        maxBytes: settings.maxMessageBytes,
        spoolDir,
        spoolTag,
        memory: { capacity: memory.capacity, shared: memory.shared },
        held,
      }
      const worker = withYoungGeneration(THREAD_SEMI_SPACE_MB, () => new Worker(siblingModule("./mx-thread.ts", import.meta.url), { workerData }))
      const thread: Thread = {
        worker,
        posts: turnPosts<ToThread>((messages) => worker.postMessage(messages)),
        states: new Map(),
        held,
        spoolTag,
        files: new Set(),
        ready: false,
      }
      current = thread
      worker.on("message", (messages: ReadonlyArray<FromThread>) => {
        for (const m of messages) {
          if (m.t === "ready") {
            thread.ready = true
            port = m.port
            resolve(m.port)
          } else if (m.t === "failed") {
            reject(new Error(m.message))
            void worker.terminate()
          } else step(thread, m)
        }
      })
      worker.on("error", (e: unknown) => {
        if (thread.ready) log(Effect.logError("mx: protocol thread failed", String(e instanceof Error ? e.stack ?? e : e)))
        else reject(e)
      })
      worker.on("exit", (code: number) => {
        if (!thread.ready) reject(new Error(`mx: protocol thread exited with code ${code} before listening`))
        gone(thread, code)
      })
    })

  await open()
  // A renewed certificate (SIGHUP) goes to the thread, and to any thread started after.
  const detach = tls.attach({
    updateSecureContext: (options) => {
      certificate = { key: String(options?.key), cert: String(options?.cert) }
      current?.posts.send({ t: "tls", tls: certificate })
    },
  })

  const close = async () => {
    stopping = true
    detach()
    const thread = current
    if (!thread) return
    await new Promise<void>((done) => {
      thread.closed = done
      thread.worker.postMessage([{ t: "stop" }] satisfies Array<ToThread>)
      // smtp-server ends the sessions left after its closeTimeout; a thread that cannot is ended.
      setTimeout(done, protocolOptions(settings).closeTimeout + STOP_GRACE_MS).unref()
    })
    await thread.worker.terminate()
  }
  return { port, close, thread: () => (current?.ready ? current.worker : undefined) }
}
