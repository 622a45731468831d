/**
 * The MessagePreparer port: where a received message is authenticated, parsed and encoded
 * (./prepare.ts) before the writer commits it. The live adapter runs that work on worker
 * threads (src/ingest/prepare-pool.ts), off the event loop that speaks SMTP for every session;
 * `inProcess` runs it right here (INGEST_THREADS=0, and where a runtime has no workers).
 *
 * Either way DNS goes through the Dns port, so the TTL cache is one per process, and the result
 * is the same message row.
 */
import { Context, Effect, Layer } from "effect"
import { mailauthResolver } from "../shared/dns-resolver.ts"
import { loadOnce } from "../shared/load-once.ts"
import type { Authenticated } from "./authenticate.ts"
import type { MessageSummary, PrepareJob, ReadyMessage } from "./prepare.ts"

export interface MessagePreparerShape {
  /**
   * The message's row and summary, or its summary alone when its row and bytes are kept on the
   * database's thread for the statement that stores them (./prepare.ts `KeptMessage`). It cannot
   * fail for the mail's content (mail is never refused for it, ./mime.ts); bytes that cannot be
   * read or kept are a defect, a local error to the sender.
   */
  readonly prepare: (job: PrepareJob) => Effect.Effect<ReadyMessage>
  /**
   * Starts loading what preparing needs, ahead of the first job, in the background (the
   * in-process preparer's mailauth and parsing code); absent where there is nothing to load.
   */
  readonly warm?: () => void
}

/** Logs what the verdicts could not be (the message is stored with `temperror`). */
export const warnAuthFailure = <M extends MessageSummary>(m: M): Effect.Effect<M> =>
  m.authFailure ? Effect.as(Effect.logWarning("mail authentication failed", m.authFailure), m) : Effect.succeed(m)

export class MessagePreparer extends Context.Service<MessagePreparer, MessagePreparerShape>()("app/MessagePreparer") {
  /** On the calling fiber's thread. */
  static readonly inProcess = Layer.effect(
    MessagePreparer,
    Effect.gen(function*() {
      const resolver = yield* mailauthResolver()
      // Loaded with the first message, not by whoever imports this module or builds the layer:
      // mailauth and mailparser's preparing code are ~20–40 MB resident, which a process that
      // takes no mail (or takes it on prepare threads) never needs; on PGlite that is the
      // difference between ~230 and ~250 MiB idle.
      // A failed load is tried again with the next message (this one's sender gets a 451 and retries).
      const load = loadOnce(() =>
        Promise.all([import("./prepare.ts"), import("./verdicts.ts")]).then(([{ prepareMessage }, { makeVerdictMemo }]) => {
          const verdicts = makeVerdictMemo<Authenticated>()
          return (job: PrepareJob) => prepareMessage(job, resolver, verdicts)
        })
      )
      return MessagePreparer.of({
        prepare: (job) =>
          Effect.promise(() => load().then((prepare) => prepare(job))).pipe(Effect.flatMap(warnAuthFailure)),
        // A load that fails here is tried again by the job that needs it.
        warm: () => void load().catch(() => undefined),
      })
    }),
  )
}
