/**
 * The one message sequence the PGlite thread sends per statement execution (Bind, Execute, Sync of
 * the extended query protocol), encoded in one buffer with Node's native UTF-8 length and write.
 * PGlite's own serializer measures each string with a JavaScript loop over its characters and
 * grows, copies and slices its writer per message: with a 100 KiB message's row as a parameter
 * those were ~35 % of the database thread's time (bench/REPORT.md, MX ingest, 2026-11-26).
 *
 * Text values go in text format; byte values (bytea parameters) in binary format, as they are,
 * instead of PGlite's `\x` hex text built one byte at a time.
 */
import { Buffer } from "node:buffer"
import type { ByteaParameter } from "../../effects/ports/Database.ts"

export type WireValue = string | Uint8Array | null

/** Bytes bound as they are: they go in binary format (the PGlite adapters' `bytea`). */
export const byteaInBinary = (n: number, bytes: Uint8Array): ByteaParameter => ({ sql: `$${n}::bytea`, value: bytes })

/** Bind (unnamed portal, statement `name`, `values`, text results), Execute (all rows), Sync. */
export const bindExecuteSync = (name: string, values: ReadonlyArray<WireValue>): Uint8Array => {
  const n = values.length
  const nameBytes = Buffer.byteLength(name, "utf8")
  const lengths = new Array<number>(n)
  // Bind: type, length, portal "\0", name "\0", format count, formats, value count, values, result format count.
  let bind = 4 + 1 + nameBytes + 1 + 2 + 2 * n + 2 + 2
  for (let i = 0; i < n; i++) {
    const v = values[i]!
    const length = v === null ? -1 : typeof v === "string" ? Buffer.byteLength(v, "utf8") : v.byteLength
    lengths[i] = length
    bind += 4 + Math.max(0, length)
  }
  const out = Buffer.allocUnsafe(1 + bind + EXECUTE_SYNC.length)
  let at = out.writeUInt8(0x42, 0) // 'B'
  at = out.writeInt32BE(bind, at)
  at = out.writeUInt8(0, at) // unnamed portal
  at += out.write(name, at, "utf8")
  at = out.writeUInt8(0, at)
  at = out.writeUInt16BE(n, at)
  for (let i = 0; i < n; i++) at = out.writeInt16BE(values[i] instanceof Uint8Array ? 1 : 0, at)
  at = out.writeUInt16BE(n, at)
  for (let i = 0; i < n; i++) {
    const v = values[i]!
    at = out.writeInt32BE(lengths[i]!, at)
    if (typeof v === "string") at += out.write(v, at, "utf8")
    else if (v !== null) {
      out.set(v, at)
      at += v.byteLength
    }
  }
  at = out.writeUInt16BE(0, at) // every result column in text format
  out.set(EXECUTE_SYNC, at)
  return out
}

/** Execute the unnamed portal with no row limit ('E', 9, "", 0), then Sync ('S', 4). */
const EXECUTE_SYNC = Uint8Array.of(0x45, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0x53, 0, 0, 0, 4)
