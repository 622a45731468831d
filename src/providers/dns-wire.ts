/**
 * DNS questions on the wire (RFC 1035, EDNS0 per RFC 6891, TCP on truncation per RFC 7766),
 * answered with the records' TTLs. Why not node:dns: its resolver hides TTLs for every type but
 * A/AAAA, and a cache that honours TTLs needs them for TXT (SPF, DKIM, DMARC), MX and PTR too.
 * Answers come in the shapes of node:dns `resolve(name, rrtype)`, which mailauth expects.
 */
import * as dgram from "node:dgram"
import * as net from "node:net"
import { randomInt } from "node:crypto"

const TYPES: Record<string, number> = { A: 1, NS: 2, CNAME: 5, SOA: 6, PTR: 12, MX: 15, TXT: 16, AAAA: 28 }
const OPT = 41
/** What we tell servers we can take over UDP (the DNS Flag Day 2020 value). */
const UDP_PAYLOAD = 1232

export interface Server {
  readonly host: string
  readonly port: number
}

/** `1.2.3.4`, `1.2.3.4:5353`, `::1`, `[::1]:5353` → host and port. */
export const parseServer = (entry: string): Server => {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry)
  if (bracketed) return { host: bracketed[1]!, port: Number(bracketed[2] ?? 53) }
  const parts = entry.split(":")
  if (parts.length === 2) return { host: parts[0]!, port: Number(parts[1]) }
  return { host: entry, port: 53 }
}

export interface WireAnswer {
  /** Records of the asked type, in node:dns shapes. */
  readonly records: Array<unknown>
  /** Seconds the answer may be kept: the smallest TTL of the records (or, when there are none, of the SOA). */
  readonly ttl: number | undefined
}

/** A failed question; `code` as node:dns has it (ENOTFOUND, ENODATA, ESERVFAIL, ETIMEOUT, …). */
export class WireError extends Error {
  readonly code: string
  /** For ENOTFOUND/ENODATA: how long the server says the absence holds (SOA), if it said. */
  readonly ttl: number | undefined
  constructor(code: string, message: string, ttl?: number) {
    super(message)
    this.code = code
    this.ttl = ttl
  }
}

const encodeName = (name: string): Array<number> => {
  const out: Array<number> = []
  for (const label of name.replace(/\.$/, "").split(".")) {
    if (label === "") continue
    const bytes = Buffer.from(label, "utf8")
    if (bytes.length > 63) throw new WireError("EBADNAME", `label too long in ${name}`)
    out.push(bytes.length, ...bytes)
  }
  out.push(0)
  return out
}

const encodeQuery = (id: number, name: string, type: number): Buffer => {
  const header = [id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]
  const opt = [0, OPT >> 8, OPT & 0xff, UDP_PAYLOAD >> 8, UDP_PAYLOAD & 0xff, 0, 0, 0, 0, 0, 0]
  return Buffer.from([...header, ...encodeName(name), type >> 8, type & 0xff, 0, 1, ...opt])
}

/** Reads a (possibly compressed) name at `offset`; returns it and the offset after it in place. */
const readName = (buf: Buffer, offset: number): [string, number] => {
  const labels: Array<string> = []
  let at = offset
  let end = -1
  for (let jumps = 0; jumps < 64; jumps++) {
    const len = buf[at]
    if (len === undefined) throw new WireError("EBADRESP", "truncated name")
    if (len === 0) return [labels.join("."), end < 0 ? at + 1 : end]
    if ((len & 0xc0) === 0xc0) {
      if (end < 0) end = at + 2
      at = ((len & 0x3f) << 8) | buf[at + 1]!
      continue
    }
    labels.push(buf.toString("utf8", at + 1, at + 1 + len))
    at += 1 + len
  }
  throw new WireError("EBADRESP", "name compression loop")
}

const ipv6 = (b: Buffer): string => {
  const words = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16))
  // The longest run of zero words becomes "::" (RFC 5952).
  let best = [-1, 0]
  for (let i = 0; i < 8;) {
    if (words[i] !== "0") {
      i++
      continue
    }
    let j = i
    while (j < 8 && words[j] === "0") j++
    if (j - i > best[1]! && j - i > 1) best = [i, j - i]
    i = j
  }
  if (best[0]! < 0) return words.join(":")
  return `${words.slice(0, best[0]).join(":")}::${words.slice(best[0]! + best[1]!).join(":")}`
}

const rdata = (buf: Buffer, type: number, at: number, len: number): unknown => {
  switch (type) {
    case 1:
      return Array.from(buf.subarray(at, at + 4)).join(".")
    case 28:
      return ipv6(buf.subarray(at, at + 16))
    case 15:
      return { priority: buf.readUInt16BE(at), exchange: readName(buf, at + 2)[0] }
    case 16: {
      const strings: Array<string> = []
      for (let i = at; i < at + len;) {
        const n = buf[i]!
        strings.push(buf.toString("utf8", i + 1, i + 1 + n))
        i += 1 + n
      }
      return strings
    }
    default:
      return readName(buf, at)[0]
  }
}

/** Parses an answer to a question of `type`. */
export const decodeAnswer = (buf: Buffer, id: number, type: number): WireAnswer & { readonly truncated: boolean } => {
  if (buf.length < 12 || buf.readUInt16BE(0) !== id) throw new WireError("EBADRESP", "answer to another question")
  const flags = buf.readUInt16BE(2)
  const truncated = (flags & 0x0200) !== 0
  const rcode = flags & 0x000f
  const counts = [buf.readUInt16BE(4), buf.readUInt16BE(6), buf.readUInt16BE(8)] as const
  let at = 12
  for (let i = 0; i < counts[0]; i++) at = readName(buf, at)[1] + 4
  const records: Array<unknown> = []
  let ttl: number | undefined
  let negativeTtl: number | undefined
  for (let section = 1; section <= 2; section++) {
    for (let i = 0; i < counts[section]!; i++) {
      at = readName(buf, at)[1]
      const rrtype = buf.readUInt16BE(at)
      const rrttl = buf.readUInt32BE(at + 4)
      const len = buf.readUInt16BE(at + 8)
      at += 10
      if (section === 1 && (rrtype === type || rrtype === 5)) {
        ttl = ttl === undefined ? rrttl : Math.min(ttl, rrttl)
        if (rrtype === type) records.push(rdata(buf, rrtype, at, len))
      }
      if (section === 2 && rrtype === 6) {
        // RFC 2308: a negative answer lasts min(SOA TTL, SOA MINIMUM).
        const afterNames = readName(buf, readName(buf, at)[1])[1]
        negativeTtl = Math.min(rrttl, buf.readUInt32BE(afterNames + 16))
      }
      at += len
    }
  }
  if (rcode === 3) throw new WireError("ENOTFOUND", "no such name", negativeTtl)
  if (rcode === 2) throw new WireError("ESERVFAIL", "server failure")
  if (rcode === 5) throw new WireError("EREFUSED", "refused")
  if (rcode !== 0) throw new WireError(rcode === 1 ? "EFORMERR" : "ENOTIMP", `rcode ${rcode}`)
  if (records.length === 0 && !truncated) throw new WireError("ENODATA", "no records of that type", negativeTtl)
  return { records, ttl, truncated }
}

const overUdp = (server: Server, query: Buffer, timeoutMs: number) =>
  new Promise<Buffer>((resolve, reject) => {
    const socket = dgram.createSocket(net.isIPv6(server.host) ? "udp6" : "udp4")
    const timer = setTimeout(() => done(new WireError("ETIMEOUT", "no answer in time")), timeoutMs)
    const done = (e: Error | null, answer?: Buffer) => {
      clearTimeout(timer)
      socket.close()
      e ? reject(e) : resolve(answer!)
    }
    socket.on("error", (e) => done(new WireError("ECONNREFUSED", e.message)))
    socket.on("message", (msg) => done(null, msg))
    socket.send(query, server.port, server.host)
  })

const overTcp = (server: Server, query: Buffer, timeoutMs: number) =>
  new Promise<Buffer>((resolve, reject) => {
    const socket = net.connect({ host: server.host, port: server.port })
    let got = Buffer.alloc(0)
    const timer = setTimeout(() => done(new WireError("ETIMEOUT", "no answer in time")), timeoutMs)
    const done = (e: Error | null, answer?: Buffer) => {
      clearTimeout(timer)
      socket.destroy()
      e ? reject(e) : resolve(answer!)
    }
    socket.on("error", (e) => done(new WireError("ECONNREFUSED", e.message)))
    socket.on("data", (d) => {
      got = Buffer.concat([got, d])
      if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) done(null, got.subarray(2, 2 + got.readUInt16BE(0)))
    })
    const length = Buffer.alloc(2)
    length.writeUInt16BE(query.length)
    socket.write(Buffer.concat([length, query]))
  })

/** Asks the servers in turn (`tries` rounds) until one answers; over TCP when the UDP answer was truncated. */
export const ask = async (
  servers: ReadonlyArray<Server>,
  name: string,
  rrtype: string,
  options: { readonly timeoutMs: number; readonly tries: number },
): Promise<WireAnswer> => {
  const type = TYPES[rrtype.toUpperCase()]
  if (type === undefined) throw new WireError("ENOTIMP", `record type ${rrtype} is not supported`)
  let last: WireError = new WireError("ECONNREFUSED", "no DNS servers")
  for (let round = 0; round < options.tries; round++) {
    for (const server of servers) {
      const id = randomInt(0, 0x10000)
      const query = encodeQuery(id, name, type)
      try {
        const udp = decodeAnswer(await overUdp(server, query, options.timeoutMs), id, type)
        if (!udp.truncated) return udp
        return decodeAnswer(await overTcp(server, query, options.timeoutMs), id, type)
      } catch (e) {
        const err = e instanceof WireError ? e : new WireError("EBADRESP", String(e))
        // An answer (even "no such name") is final; only silence and failures try the next server.
        if (err.code === "ENOTFOUND" || err.code === "ENODATA") throw err
        last = err
      }
    }
  }
  throw last
}
