/**
 * What the MX and the sandbox SMTP servers share: the reply type their session policies fail
 * with, the one local-error reply, turning a step's failures and defects into replies, and the
 * bridge from an Effect step to smtp-server's callbacks.
 */
import { Cause, Effect, Exit, Schema } from "effect"
import type { AppRuntime, AppServices } from "../layers.ts"
import { smtpError } from "./smtp-error.ts"

/** An SMTP answer other than success; the server writes `code message`. */
export class SmtpReply extends Schema.TaggedError<SmtpReply>()("SmtpReply", {
  code: Schema.Number,
  message: Schema.String,
}) {}

export const reply = (code: number, message: string) => new SmtpReply({ code, message })

/** Recipients per message on both servers; more get 452 and are retried in another transaction. */
export const MAX_RECIPIENTS = 100

/** Something went wrong on our side: the sender keeps the message and tries again later. */
export const LOCAL_ERROR = reply(451, "4.3.0 Local error in processing, try again later")

/**
 * The answers both servers give alike: a reply already made, else LOCAL_ERROR. Nothing answers
 * for a message's content: mail is never refused for it (DECISIONS.md "Hostile input").
 */
export const commonReply = (e: { readonly _tag: string }): SmtpReply => e._tag === "SmtpReply" ? (e as SmtpReply) : LOCAL_ERROR

export { smtpError } from "./smtp-error.ts"

/**
 * Failures and defects alike end in a reply: `table` maps a service error to its reply (or
 * LOCAL_ERROR); the cause of a local error is logged as `<server>: local error`.
 */
export const replyingWith = (server: string, table: (e: { readonly _tag: string; readonly message?: string }) => SmtpReply) =>
<A, R>(effect: Effect.Effect<A, { readonly _tag: string }, R>): Effect.Effect<A, SmtpReply, R> =>
  effect.pipe(
    Effect.catchCause((cause) => {
      const failure = cause.reasons.find(Cause.isFailReason)
      const answer = failure ? table(failure.error) : LOCAL_ERROR
      return (answer === LOCAL_ERROR ? Effect.logError(`${server}: local error`, cause) : Effect.void).pipe(
        Effect.andThen(Effect.fail(answer)),
      )
    }),
  )

/**
 * Runs a session step on the runtime and hands its outcome to an smtp-server callback: the
 * step's SmtpReply on failure, 451 on a defect (logged as `<server>: step died`). The outcome
 * goes to the callback from the fiber's own exit (no promise in between): a step that needs no
 * I/O (a RCPT whose route is kept) is answered before this returns, as smtp-server's own
 * synchronous handlers are.
 */
export const stepRunner = (runtime: AppRuntime, server: string) =>
<A>(effect: Effect.Effect<A, SmtpReply, AppServices>, done: (err: Error | null, value?: A) => void) => {
  runtime.runCallback(effect, {
    onExit: (exit) => {
      if (Exit.isSuccess(exit)) return done(null, exit.value)
      // Besides the step's SmtpReply, only the runtime's own failure (its build, or its disposal
      // at shutdown) can arrive here.
      const failure = exit.cause.reasons.find(Cause.isFailReason)?.error
      const answer = failure instanceof SmtpReply ? failure : undefined
      if (!answer) runtime.runFork(Effect.logError(`${server}: step died`, exit.cause))
      done(smtpError(answer ?? LOCAL_ERROR))
    },
  })
}
