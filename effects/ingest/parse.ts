/**
 * Parsing as an Effect: `parseMessage`. The parsing itself is ./mime.ts, loaded with the first
 * message parsed here (mailparser's graph is not needed by a process that has captured nothing
 * yet, and the MX prepares on threads or through ./preparer.ts).
 */
import { Effect } from "effect"
import { loadOnce } from "../shared/load-once.ts"
import { isMessageBytes, type MessageBytes } from "./bytes.ts"

const mime = loadOnce(() => import("./mime.ts"))

/**
 * `parseMail` as an Effect (the sandbox's capture), streaming from wherever the bytes are. Mail
 * is never refused for its content (./mime.ts reads what it can), so the one failure is bytes
 * that cannot be read: a defect, which the SMTP servers answer as a local error.
 */
export const parseMessage = (raw: Uint8Array | MessageBytes) =>
  Effect.promise(() =>
    mime().then(({ parseMail }) =>
      isMessageBytes(raw) ? parseMail(() => raw.stream()) : parseMail(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength))
    )
  )
