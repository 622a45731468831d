/**
 * The two parameters of an ingest batch call (`ingest_batch_bytes` / `ingest_batch_alone`,
 * ./store.ts). Plain code without Effect: on PGlite the database's own thread builds them
 * (src/db/pglite-worker.ts) when the batch names messages kept there (`KeptBatch`).
 *
 * The JSON: the small destinations first (admission reads them), where each message's bytes
 * start in the blob, then the rows as encoded, joined as bytes and decoded once (one string per
 * batch, not one per message). The blob: the messages' bytes, one after another.
 */
import type { KeptRef, ReadyMessage } from "./prepare.ts"

/** The bytes a message adds to a batch's blob. */
export const batchBytesOf = (m: ReadyMessage): number => ("kept" in m ? m.byteLength : m.bytes.byteLength)

/** One message's copies as the call reads them. */
export interface BatchDestination {
  readonly address_id: number
  readonly rcpt: string
}

/** A message's row (UTF-8 JSON) and bytes (./prepare.ts `PreparedMessage`). */
export interface EncodedMessage {
  readonly row: Uint8Array
  readonly bytes: Uint8Array
}

export const batchParameters = (
  price: number,
  destinations: ReadonlyArray<ReadonlyArray<BatchDestination>>,
  messages: ReadonlyArray<EncodedMessage>,
): [string, Buffer] => {
  const bases: Array<number> = []
  let size = 0
  for (const m of messages) {
    bases.push(size)
    size += m.bytes.byteLength
  }
  const head = `{"price":${price},"destinations":${JSON.stringify(destinations)},"bases":${JSON.stringify(bases)},"messages":[`
  const parts: Array<Uint8Array> = [Buffer.from(head)]
  messages.forEach((m, i) => {
    if (i > 0) parts.push(COMMA)
    parts.push(m.row)
  })
  parts.push(TAIL)
  return [Buffer.concat(parts).toString("utf8"), Buffer.concat(messages.map((m) => m.bytes), size)]
}
const COMMA = Buffer.from(",")
const TAIL = Buffer.from("]}")

/**
 * The whole parameter list of a batch call (`$1` and `$2`) when some of its messages are kept on
 * PGlite's thread: that thread's adapter (src/db/pglite-thread.ts) sends it as it is, and the
 * thread puts the kept rows and bytes in their places and builds the two parameters there. The
 * messages in hand are copied with it, not moved: a batch that fails is tried again message by
 * message with the same ones.
 */
export class KeptBatch {
  readonly price: number
  readonly destinations: ReadonlyArray<ReadonlyArray<BatchDestination>>
  readonly messages: ReadonlyArray<EncodedMessage | { readonly kept: KeptRef }>
  constructor(
    price: number,
    destinations: ReadonlyArray<ReadonlyArray<BatchDestination>>,
    messages: ReadonlyArray<EncodedMessage | { readonly kept: KeptRef }>,
  ) {
    this.price = price
    this.destinations = destinations
    this.messages = messages
  }
}
