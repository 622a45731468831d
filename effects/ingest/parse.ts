/**
 * Parsing as an Effect: `parseMessage` and its error. The parsing itself is ./mime.ts, loaded
 * with the first message parsed here (mailparser's graph is not needed by a process that has
 * captured nothing yet, and the MX prepares on threads or through ./preparer.ts).
 */
import { Effect, Schema } from "effect"
import { loadOnce } from "../shared/load-once.ts"
import { isMessageBytes, type MessageBytes } from "./bytes.ts"

const mime = loadOnce(() => import("./mime.ts"))

/** mailparser gave up on the message: 554 5.6.0. */
export class MalformedMessage extends Schema.TaggedError<MalformedMessage>()("MalformedMessage", {
  message: Schema.String,
}) {}

/** `parseMail` as an Effect (the sandbox's capture), streaming from wherever the bytes are. */
export const parseMessage = (raw: Uint8Array | MessageBytes) =>
  Effect.tryPromise({
    try: () =>
      mime().then(({ parseMail }) =>
        isMessageBytes(raw) ? parseMail(raw.stream()) : parseMail(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength))
      ),
    catch: (e) => new MalformedMessage({ message: e instanceof Error ? e.message : String(e) }),
  })
