/**
 * Server-side request forgery guard: which IP addresses a customer-supplied URL may make this
 * server connect to. Pure parsing and range tables (no node:net), so the same rule runs at
 * creation (literal IPs in a URL) and at delivery (every address the host name resolves to).
 *
 * Embedded IPv4 forms are classified by the IPv4 inside (`::ffff:127.0.0.1`, NAT64 `64:ff9b::/96`,
 * 6to4 `2002::/16`), because a connection to them reaches that IPv4 host.
 */

export type IpClass =
  | "public"
  | "unspecified"
  | "loopback"
  | "private"
  | "link-local"
  | "cgnat"
  | "unique-local"
  | "multicast"
  | "broadcast"
  | "documentation"
  | "reserved"

/** Strict dotted-quad (`127.0.0.1`); leading zeros and short forms are not accepted here. */
export const parseIPv4 = (s: string): Array<number> | undefined => {
  const parts = s.split(".")
  if (parts.length !== 4) return undefined
  const out: Array<number> = []
  for (const p of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return undefined
    const n = Number(p)
    if (n > 255) return undefined
    out.push(n)
  }
  return out
}

/** IPv6 text (with `::`, an embedded IPv4 tail, an optional `%zone`, optional brackets) → 16 bytes. */
export const parseIPv6 = (input: string): Array<number> | undefined => {
  let s = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input
  const zone = s.indexOf("%")
  if (zone >= 0) s = s.slice(0, zone)
  if (!s.includes(":")) return undefined
  let tail: Array<number> = []
  const lastColon = s.lastIndexOf(":")
  if (s.slice(lastColon + 1).includes(".")) {
    const v4 = parseIPv4(s.slice(lastColon + 1))
    if (!v4) return undefined
    tail = v4
    s = s.slice(0, lastColon + 1) // "::ffff:" or "::"
    if (!s.endsWith("::")) s = s.slice(0, -1)
  }
  const want = tail.length ? 6 : 8
  const halves = s.split("::")
  if (halves.length > 2) return undefined
  const groups = (h: string) => (h === "" ? [] : h.split(":"))
  let words: Array<string>
  if (halves.length === 2) {
    const head = groups(halves[0]!)
    const rest = groups(halves[1]!)
    const fill = want - head.length - rest.length
    if (fill < 1) return undefined
    words = [...head, ...Array.from({ length: fill }, () => "0"), ...rest]
  } else {
    words = groups(s)
  }
  if (words.length !== want) return undefined
  const out: Array<number> = []
  for (const w of words) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(w)) return undefined
    const n = Number.parseInt(w, 16)
    out.push(n >> 8, n & 0xff)
  }
  return [...out, ...tail]
}

const inV4 = (ip: ReadonlyArray<number>, base: ReadonlyArray<number>, bits: number): boolean => {
  for (let i = 0; i < 4; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8))
    if (take === 0) return true
    const mask = (0xff << (8 - take)) & 0xff
    if ((ip[i]! & mask) !== (base[i]! & mask)) return false
  }
  return true
}

const V4_RANGES: ReadonlyArray<readonly [ReadonlyArray<number>, number, IpClass]> = [
  [[0, 0, 0, 0], 8, "unspecified"],
  [[10, 0, 0, 0], 8, "private"],
  [[100, 64, 0, 0], 10, "cgnat"],
  [[127, 0, 0, 0], 8, "loopback"],
  [[169, 254, 0, 0], 16, "link-local"],
  [[172, 16, 0, 0], 12, "private"],
  [[192, 0, 0, 0], 24, "reserved"],
  [[192, 0, 2, 0], 24, "documentation"],
  [[192, 88, 99, 0], 24, "reserved"],
  [[192, 168, 0, 0], 16, "private"],
  [[198, 18, 0, 0], 15, "reserved"],
  [[198, 51, 100, 0], 24, "documentation"],
  [[203, 0, 113, 0], 24, "documentation"],
  [[224, 0, 0, 0], 4, "multicast"],
  [[255, 255, 255, 255], 32, "broadcast"],
  [[240, 0, 0, 0], 4, "reserved"],
]

export const classifyIPv4 = (ip: ReadonlyArray<number>): IpClass => {
  for (const [base, bits, cls] of V4_RANGES) if (inV4(ip, base, bits)) return cls
  return "public"
}

const word = (b: ReadonlyArray<number>, i: number) => (b[i * 2]! << 8) | b[i * 2 + 1]!
const zeros = (b: ReadonlyArray<number>, from: number, to: number) => b.slice(from, to).every((x) => x === 0)

export const classifyIPv6 = (b: ReadonlyArray<number>): IpClass => {
  if (zeros(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return classifyIPv4(b.slice(12)) // ::ffff:a.b.c.d
  if (zeros(b, 0, 16)) return "unspecified"
  if (zeros(b, 0, 15) && b[15] === 1) return "loopback"
  if (zeros(b, 0, 12)) return "reserved" // deprecated IPv4-compatible ::a.b.c.d
  const w0 = word(b, 0)
  if (w0 === 0x64 && word(b, 1) === 0xff9b && zeros(b, 4, 12)) return classifyIPv4(b.slice(12)) // NAT64 64:ff9b::/96
  if (w0 === 0x64 && word(b, 1) === 0xff9b && word(b, 2) === 1) return "private" // local-use NAT64 64:ff9b:1::/48
  if (w0 === 0x2002) { // 6to4 2002:AABB:CCDD::/48 reaches the IPv4 AA.BB.CC.DD
    const v4 = classifyIPv4(b.slice(2, 6))
    return v4 === "public" ? "public" : v4
  }
  if ((w0 & 0xfe00) === 0xfc00) return "unique-local" // fc00::/7
  if ((w0 & 0xffc0) === 0xfe80) return "link-local" // fe80::/10
  if ((w0 & 0xffc0) === 0xfec0) return "private" // deprecated site-local fec0::/10
  if ((w0 & 0xff00) === 0xff00) return "multicast"
  if (w0 === 0x2001 && word(b, 1) === 0x0db8) return "documentation"
  if (w0 === 0x3fff && (word(b, 1) & 0xf000) === 0) return "documentation" // 3fff::/20
  if (w0 === 0x2001 && word(b, 1) < 0x0200) return "reserved" // IETF protocol assignments (Teredo, ORCHID, …)
  if (w0 === 0x0100 && zeros(b, 2, 8)) return "reserved" // discard-only 100::/64
  if ((w0 & 0xe000) !== 0x2000) return "reserved" // outside global unicast 2000::/3
  return "public"
}

/** The class of an IP literal, or undefined when `ip` is not one. */
export const classifyIp = (ip: string): IpClass | undefined => {
  const v4 = parseIPv4(ip)
  if (v4) return classifyIPv4(v4)
  const v6 = parseIPv6(ip)
  return v6 ? classifyIPv6(v6) : undefined
}

/** True for an IP literal a server may connect to on a customer's behalf. */
export const isPublicIp = (ip: string): boolean => classifyIp(ip) === "public"
