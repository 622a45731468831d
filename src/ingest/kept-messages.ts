/**
 * Messages prepared on PGlite's thread and kept there (effects/ingest/prepare.ts `KeptMessage`):
 * the rows and bytes of small received mail wait here, on the thread whose statements store them,
 * instead of travelling to the event loop and back inside the batch. Each host port
 * (./prepare-serve.ts) keeps its own, by job id; a batch statement names them
 * (effects/ingest/batch-parameters.ts `KeptBatch`), and the port's owner lets them go once no
 * statement will name them again, or they all go when the port closes.
 */
import { batchParameters, type EncodedMessage, type KeptBatch } from "../../effects/ingest/batch-parameters.ts"
import type { KeptRef } from "../../effects/ingest/prepare.ts"
import { freeBytes } from "../../effects/shared/free-bytes.ts"

const byPort = new Map<number, Map<number, EncodedMessage>>()

/** The messages kept for the host port `key` (made on first use). */
export const keptFor = (key: number): Map<number, EncodedMessage> => {
  let kept = byPort.get(key)
  if (!kept) byPort.set(key, (kept = new Map()))
  return kept
}

/** Lets messages go: their bytes are freed at once (no statement reads them any more). */
export const forget = (key: number, ids: Iterable<number>): void => {
  const kept = byPort.get(key)
  if (!kept) return
  for (const id of ids) {
    const m = kept.get(id)
    kept.delete(id)
    if (m) {
      freeBytes(m.row)
      freeBytes(m.bytes)
    }
  }
}

/** Every message of the port `key` goes (the port closed). */
export const forgetPort = (key: number): void => {
  const kept = byPort.get(key)
  if (kept) forget(key, [...kept.keys()])
  byPort.delete(key)
}

const keptMessage = (ref: KeptRef): EncodedMessage => {
  const m = byPort.get(ref.key)?.get(ref.id)
  // Its port closed (this thread stopped preparing): the batch fails and is retried message by
  // message, and each sender whose message is gone gets a temporary error.
  if (!m) throw new Error(`prepared message ${ref.key}:${ref.id} is no longer kept on the database's thread`)
  return m
}

/** A batch call's two parameters, the kept messages read where they are (copied into the blob, still kept). */
export const keptBatchParameters = (batch: KeptBatch): [string, Buffer] =>
  batchParameters(batch.price, batch.destinations, batch.messages.map((m) => ("kept" in m ? keptMessage(m.kept) : m)))
