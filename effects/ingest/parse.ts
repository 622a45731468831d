/**
 * Parsing as an Effect: `parseMessage` and its error. The parsing itself is ./mime.ts.
 */
import { Effect, Schema } from "effect"
import { isMessageBytes, type MessageBytes } from "./bytes.ts"
import { parseMail } from "./mime.ts"

/** mailparser gave up on the message: 554 5.6.0. */
export class MalformedMessage extends Schema.TaggedError<MalformedMessage>()("MalformedMessage", {
  message: Schema.String,
}) {}

/** `parseMail` as an Effect (the sandbox's capture), streaming from wherever the bytes are. */
export const parseMessage = (raw: Uint8Array | MessageBytes) =>
  Effect.tryPromise({
    try: () => (isMessageBytes(raw) ? parseMail(raw.stream()) : parseMail(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength))),
    catch: (e) => new MalformedMessage({ message: e instanceof Error ? e.message : String(e) }),
  })
