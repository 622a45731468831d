/**
 * What the MX and the sandbox SMTP servers share: the reply type their session policies fail
 * with, the bridge from an Effect step to smtp-server's callbacks, and reading DATA (size limit,
 * a client that leaves before the final dot).
 */
import { Cause, Effect, Exit, type ManagedRuntime, Schema } from "effect"
import type { SMTPServerDataStream } from "smtp-server"

/** An SMTP answer other than success; the server writes `code message`. */
export class SmtpReply extends Schema.TaggedError<SmtpReply>()("SmtpReply", {
  code: Schema.Number,
  message: Schema.String,
}) {}

/** An Error smtp-server writes as `responseCode message`. */
export const smtpError = (r: { code: number; message: string }) => Object.assign(new Error(r.message), { responseCode: r.code })

export const LOCAL_ERROR = { code: 451, message: "4.3.0 Local error in processing, try again later" }

/**
 * Runs a session step on the runtime and hands its outcome to an smtp-server callback: the
 * step's SmtpReply on failure, 451 on a defect (logged as `<server>: step died`).
 */
export const stepRunner = (runtime: ManagedRuntime.ManagedRuntime<any, any>, server: string) =>
<A>(effect: Effect.Effect<A, SmtpReply, any>, done: (err: Error | null, value?: A) => void) => {
  runtime.runPromiseExit(effect).then(
    (exit) => {
      if (Exit.isSuccess(exit)) return done(null, exit.value)
      const failure = exit.cause.reasons.find(Cause.isFailReason)
      if (!failure) runtime.runFork(Effect.logError(`${server}: step died`, exit.cause))
      done(smtpError(failure ? failure.error : LOCAL_ERROR))
    },
    // Only when the runtime itself is gone (shutting down).
    () => done(smtpError(LOCAL_ERROR)),
  )
}

/**
 * Collects a DATA stream. A client that leaves before the final dot gets 451 and nothing is
 * handed on; an oversized message gets 552. Otherwise `complete` receives the bytes and owes
 * `callback` its answer.
 */
export const readMessage = (
  stream: SMTPServerDataStream,
  maxBytes: number,
  callback: (err: Error | null) => void,
  complete: (raw: Buffer) => void,
) => {
  const chunks: Array<Buffer> = []
  let kept = 0
  let gone = false
  stream.on("data", (chunk: Buffer) => {
    // Past the limit the bytes are counted by smtp-server, not kept: the answer is 552 anyway.
    if (kept <= maxBytes) {
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
      return callback(smtpError({ code: 552, message: `5.3.4 Message exceeds the size limit of ${maxBytes} bytes` }))
    }
    const raw = Buffer.concat(chunks)
    chunks.length = 0
    complete(raw)
  })
}
