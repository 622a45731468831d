/**
 * Posts to a thread coalesced by turn of the event loop: what is sent during one turn goes in one
 * post, after the turn's I/O (setImmediate). Waking a sleeping thread is most of a post's cost
 * (~36 µs of the event loop against ~5 µs to a busy one, bench/REPORT.md, MX ingest, thirtieth
 * session), and under load several sessions end their DATA in the same turn.
 */
import { setImmediate } from "node:timers"

export interface TurnPosts<M> {
  /** Queues `message` (and the buffers it hands over) for this turn's post. */
  readonly send: (message: M, transfer?: ReadonlyArray<ArrayBuffer>) => void
  /** Drops what is not posted yet (the thread is gone). */
  readonly clear: () => void
}

/** `post` gets each turn's messages, in the order sent, with all their buffers. */
export const turnPosts = <M>(post: (messages: Array<M>, transfer: Array<ArrayBuffer>) => void): TurnPosts<M> => {
  let messages: Array<M> = []
  let transfer: Array<ArrayBuffer> = []
  const flush = () => {
    const batch = messages
    const buffers = transfer
    messages = []
    transfer = []
    if (batch.length > 0) post(batch, buffers)
  }
  return {
    send: (message, buffers = []) => {
      if (messages.length === 0) setImmediate(flush)
      messages.push(message)
      transfer.push(...buffers)
    },
    clear: () => {
      messages = []
      transfer = []
    },
  }
}
