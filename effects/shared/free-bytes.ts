/**
 * Giving a buffer's memory back the moment its owner is done with it, instead of whenever the
 * garbage collector next looks. A dropped Uint8Array keeps its backing store until a scavenge
 * (or, once promoted, a full GC) finds it; detaching its ArrayBuffer (`transfer(0)`) drops the
 * backing store at once, and malloc hands those pages straight to the next message.
 *
 * Ingest makes several buffers per message that only one step reads (the received bytes, the
 * prepared bytes and row, a batch's blob and its copy on the database's thread); freeing each
 * after its last reader lowered the CPU per 100 KiB message on PostgreSQL by ~11 % (medians of 8
 * interleaved pairs; bench/REPORT.md, MX ingest, 2026-11-27 fourth session).
 */

/**
 * Frees `bytes` now when they are the whole of an ArrayBuffer of their own; leaves alone a view
 * into a larger buffer (a slice of Node's shared pool, or of a socket read), a SharedArrayBuffer,
 * and a buffer already detached (moved to another thread, or freed before). The caller must be
 * the last reader: every view of that ArrayBuffer reads as empty afterwards.
 */
export const freeBytes = (bytes: Uint8Array | undefined): void => {
  const buffer = bytes?.buffer
  if (!(buffer instanceof ArrayBuffer) || buffer.detached) return
  if (bytes!.byteOffset !== 0 || bytes!.byteLength !== buffer.byteLength) return
  buffer.transfer(0)
}
