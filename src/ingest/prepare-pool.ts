/**
 * The live MessagePreparer: `threads` worker threads (./prepare-worker.ts) that authenticate,
 * parse and encode received messages, so the event loop only speaks SMTP, batches and commits.
 * Measured before this existed: preparing was ~0.4 ms of CPU per 2 KiB message on the event loop
 * that also served every session; see bench/REPORT.md "MX ingest".
 *
 * - Where the process already runs a thread that can take the work (PGlite's, ./prepare-host.ts),
 *   in-memory mail goes there, through a port, instead of to threads of the pool's own; spooled
 *   mail still goes to those (started with the first such message). PGlite's thread keeps what
 *   it prepared for the statement that stores it, and the answer is a `KeptMessage`.
 * - A job goes to the thread with the fewest jobs in flight; in-memory bytes are transferred
 *   (never copied again), a spooled message travels as its file's path. The jobs of one turn of
 *   the event loop go to a thread in one post (./turn-posts.ts).
 * - The threads start on the first message (a process or a test that takes no mail never pays for
 *   them) and stop with the runtime's scope.
 * - Their DNS questions are answered here, through the Dns port and its TTL cache; a thread keeps
 *   an answer only as long as that cache still would (most mail comes from a few senders, and a
 *   round trip to this thread per question cost more than the question).
 * - A thread that dies fails its jobs as defects (the SMTP side answers 451 and the sender
 *   retries); the next job starts a new one. So does a host whose port closes, and from then on
 *   the pool starts threads of its own.
 */
import { Cause, Context, Effect, Exit, Layer } from "effect"
import { type MessagePort, Worker } from "node:worker_threads"
import type { KeptMessage, MessageSummary, PreparedMessage, PrepareJob, ReadyMessage } from "../../effects/ingest/prepare.ts"
import { MessagePreparer, type MessagePreparerShape, warnAuthFailure } from "../../effects/ingest/preparer.ts"
import { Dns } from "../../effects/ports/Dns.ts"
import { LOOP_PREPARE_BYTES } from "../config.ts"
import { siblingModule } from "../module-url.ts"
import { PrepareHost } from "./prepare-host.ts"
import { turnPosts, type TurnPosts } from "./turn-posts.ts"

type Outcome =
  | { readonly t: "done"; readonly id: number; readonly ok: true; readonly value: PreparedMessage | KeptSummary }
  | { readonly t: "done"; readonly id: number; readonly ok: false; readonly message: string }
type Question = { readonly t: "dns"; readonly q: number; readonly name: string; readonly rrtype: string }
/** From a host whose thread caught an exception nothing else did (src/db/pglite-worker.ts); its port closes next. */
type Lost = { readonly t: "lost"; readonly message: string }

/** What a host that keeps its messages (./kept-messages.ts) answers for one. */
type KeptSummary = MessageSummary & { readonly byteLength: number }

type Resume = (effect: Effect.Effect<ReadyMessage>) => void

interface Thread {
  /** A thread of the pool's own, or a port to the host's (./prepare-host.ts). */
  readonly worker: Worker | MessagePort
  readonly jobs: Map<number, Resume>
  /** Jobs go in one post per turn of the event loop (./turn-posts.ts). */
  readonly posts: TurnPosts<{ readonly id: number; readonly job: PrepareJob }>
  /** Set for a host that keeps what it prepared (./prepare-host.ts `HostPort`): its messages are `KeptMessage`s. */
  readonly key?: number
  /** Kept messages let go of since the last post (one post per turn). */
  readonly forgets: Array<number>
  lost: boolean
}

const WORKER_URL = siblingModule("./prepare-worker.ts", import.meta.url)

/** `workerUrl`: the thread's script (tests hand in one that crashes on purpose). */
export const preparePoolLayer = (threads: number, workerUrl: URL = WORKER_URL) =>
  Layer.effect(
    MessagePreparer,
    Effect.gen(function*() {
      const dns = yield* Dns
      const host = yield* PrepareHost
      /** The port to the host's thread, opened with the first in-memory message (./prepare-host.ts). */
      let hosted: Thread | undefined
      /** No host, or its port closed: every job goes to threads of the pool's own. */
      let hostGone = false
      const context = yield* Effect.context<never>()
      const pool: Array<Thread> = []
      let nextId = 0
      let closed = false

      const answer = (thread: Thread, m: Question) =>
        Effect.runPromiseWith(context)(dns.resolveKept(m.name, m.rrtype)).then(({ exit, keepMs }) => {
          if (Exit.isSuccess(exit)) return thread.worker.postMessage({ t: "dns", q: m.q, ok: true, records: exit.value, keepMs })
          const failure = exit.cause.reasons.find(Cause.isFailReason)?.error
          thread.worker.postMessage({
            t: "dns",
            q: m.q,
            ok: false,
            code: failure?.code ?? "ESERVFAIL",
            message: failure?.message ?? `DNS ${m.rrtype} ${m.name} failed`,
            keepMs: failure ? keepMs : 0,
          })
        })

      /** Fails what a dead thread held and forgets it (the next job starts another). */
      const lose = (thread: Thread, reason: unknown) => {
        const at = pool.indexOf(thread)
        if (at >= 0) pool.splice(at, 1)
        if (thread === hosted) hosted = undefined
        thread.lost = true
        thread.posts.clear()
        for (const resume of thread.jobs.values()) resume(Effect.die(reason))
        thread.jobs.clear()
      }

      /** The kept message `id` of `thread` may go: told in one post with the others of this turn. */
      const forget = (thread: Thread, id: number) => {
        if (thread.lost) return
        if (thread.forgets.length === 0) {
          queueMicrotask(() => {
            const ids = thread.forgets.splice(0)
            if (!thread.lost) thread.worker.postMessage({ t: "forget", ids })
          })
        }
        thread.forgets.push(id)
      }

      /** The message a host that keeps it answered: its summary, named by the host's key and its id. */
      const keptMessage = (thread: Thread, id: number, summary: KeptSummary): KeptMessage => ({
        ...summary,
        kept: { key: thread.key!, id },
        release: () => forget(thread, id),
      })

      /** A thread of the pool's own (a Worker), or the host's behind its port (`key`: it keeps its messages). */
      const connect = (worker: Worker | MessagePort, key?: number): Thread => {
        const posts = turnPosts<{ readonly id: number; readonly job: PrepareJob }>((jobs, transfer) => worker.postMessage({ t: "jobs", jobs }, transfer))
        const thread: Thread = { worker, jobs: new Map(), posts, forgets: [], lost: false, ...(key === undefined ? {} : { key }) }
        worker.on("message", (m: Outcome | Question | Lost) => {
          if (m.t === "dns") return void answer(thread, m)
          if (m.t === "lost") {
            hostGone = true
            return lose(thread, new Error(`the prepare host stopped preparing: ${m.message}`))
          }
          const resume = thread.jobs.get(m.id)
          thread.jobs.delete(m.id)
          const kept = m.ok && thread.key !== undefined ? keptMessage(thread, m.id, m.value as KeptSummary) : undefined
          if (!resume) return kept?.release()
          if (m.ok) return resume(warnAuthFailure(kept ?? (m.value as PreparedMessage)))
          resume(Effect.die(new Error(m.message)))
        })
        if (worker instanceof Worker) {
          worker.on("error", (e: unknown) => lose(thread, e))
          worker.on("exit", (code: number) => lose(thread, new Error(`prepare worker exited with code ${code}`)))
        } else {
          // The host's thread ended, or could not load the preparing code.
          worker.on("close", () => {
            hostGone = true
            lose(thread, new Error("the prepare host's port closed"))
          })
        }
        // Idle threads must not keep a finished process alive.
        worker.unref()
        pool.push(thread)
        return thread
      }

      /**
       * In-memory mail to the host's thread while there is one. Spooled mail (over 1 MiB,
       * src/smtp/data.ts) stays off it: preparing 10–25 MiB of plain text held a thread for up to
       * 20–80 ms at a time, which on PGlite's thread every statement would wait for.
       * The rest goes to the thread of the pool's own with the fewest jobs in flight, starting
       * threads up to `threads`.
       */
      const pick = (job: PrepareJob): Thread => {
        if (job.source._tag === "Memory" && !hostGone) {
          if (hosted) return hosted
          const opened = host.openPort()
          if (opened) return (hosted = connect(opened.port, opened.key))
          hostGone = true
        }
        let best: Thread | undefined
        for (const t of pool) if (t !== hosted && (!best || t.jobs.size < best.jobs.size)) best = t
        const own = pool.length - (hosted ? 1 : 0)
        return best && (best.jobs.size === 0 || own >= threads) ? best : connect(new Worker(workerUrl))
      }

      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          closed = true
          const all = pool.splice(0)
          // A host's port may still say "close": by then its jobs are failed below, and Deno's ports
          // have no removeAllListeners.
          for (const t of all) if (t.worker instanceof Worker) t.worker.removeAllListeners("exit")
          await Promise.all(all.map((t) => (t.worker instanceof Worker ? t.worker.terminate() : t.worker.close())))
          for (const t of all) lose(t, new Error("prepare workers stopped"))
        })
      )

      const prepare = (job: PrepareJob) =>
        Effect.callback<ReadyMessage>((resume) => {
          if (closed) return resume(Effect.die(new Error("prepare workers stopped")))
          const thread = pick(job)
          const id = nextId++
          thread.jobs.set(id, resume)
          thread.posts.send({ id, job }, job.source._tag === "Memory" ? [job.source.bytes.buffer as ArrayBuffer] : [])
          // Interrupted (shutdown): the answer, when it comes, goes nowhere.
          return Effect.sync(() => void thread.jobs.delete(id))
        })

      return MessagePreparer.of({ prepare })
    }),
  )

/** Which in-memory jobs the event loop prepares where threads run (the rest go to the threads). */
export interface Placement {
  /** In-memory messages of at least this many bytes (INGEST_LOOP_BYTES; 0: all of them). */
  readonly loopBytes: number
  /** In-memory messages of a reused connection, whatever their size (INGEST_REUSED_ON_LOOP). */
  readonly reusedOnLoop: boolean
}

/**
 * Jobs to `loop` or to `threads` as `placement` says; spooled mail always to `threads` (several
 * ms of parsing would stall every session). With `reusedOnLoop` the loop's preparing code starts
 * loading with the first job, whichever way it goes: loaded by the first reused connection's
 * message instead, it held the event loop for ~0.3 s in the middle of the traffic (one message
 * per connection beside one reused session, −11 %; bench/REPORT.md, MX ingest, thirty-seventh
 * session).
 */
export const placed = (threads: MessagePreparerShape, loop: MessagePreparerShape, placement: Placement): MessagePreparerShape => {
  let warmed = !placement.reusedOnLoop
  return {
    prepare: (job) => {
      if (!warmed) {
        warmed = true
        loop.warm?.()
      }
      const onLoop = job.source._tag === "Memory" &&
        (job.source.bytes.byteLength >= placement.loopBytes || (placement.reusedOnLoop && job.reusedConnection === true))
      return (onLoop ? loop : threads).prepare(job)
    },
  }
}

/**
 * INGEST_THREADS worker threads for what `placed` sends them (in-memory mail the placement leaves
 * them, and spooled mail), or the event loop alone when it is 0.
 */
export const messagePreparerLayer = (
  threads: number,
  placement: Placement = { loopBytes: LOOP_PREPARE_BYTES, reusedOnLoop: false },
): Layer.Layer<MessagePreparer, never, Dns> =>
  threads === 0 ? MessagePreparer.inProcess : Layer.effect(
    MessagePreparer,
    Effect.gen(function*() {
      const service = (layer: Layer.Layer<MessagePreparer, never, Dns>) => Effect.map(Layer.build(layer), (c) => Context.get(c, MessagePreparer))
      return MessagePreparer.of(placed(yield* service(preparePoolLayer(threads)), yield* service(MessagePreparer.inProcess), placement))
    }),
  )
