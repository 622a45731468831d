/**
 * Server-side request forgery guard: which IP addresses a customer-supplied URL may make this
 * server connect to. The same rule runs at creation (literal IPs in a URL) and at delivery
 * (every address the host name resolves to). What counts as an IP literal is the runtime's own
 * answer (`node:net` isIP, what a socket would connect to as an address); the range math is
 * ipaddr.js's; the tables below are the policy.
 *
 * Embedded IPv4 forms are classified by the IPv4 inside (`::ffff:127.0.0.1`, NAT64 `64:ff9b::/96`,
 * 6to4 `2002::/16`), because a connection to them reaches that IPv4 host.
 */
import ipaddr from "ipaddr.js"
import { isIP } from "node:net"

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

const v4 = (...cidrs: ReadonlyArray<string>) => cidrs.map((c) => ipaddr.IPv4.parseCIDR(c))
const v6 = (...cidrs: ReadonlyArray<string>) => cidrs.map((c) => ipaddr.IPv6.parseCIDR(c))

// First match wins (subnetMatch walks the keys in order): broadcast before reserved 240/4.
const V4_RANGES = {
  unspecified: v4("0.0.0.0/8"),
  private: v4("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
  cgnat: v4("100.64.0.0/10"),
  loopback: v4("127.0.0.0/8"),
  "link-local": v4("169.254.0.0/16"),
  documentation: v4("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"),
  broadcast: v4("255.255.255.255/32"),
  multicast: v4("224.0.0.0/4"),
  reserved: v4("192.0.0.0/24", "192.88.99.0/24", "198.18.0.0/15", "240.0.0.0/4"),
} satisfies Partial<Record<IpClass, unknown>>

// Checked after the embedded IPv4 forms are unwrapped; `reserved` last, as it spans everything
// outside global unicast 2000::/3 (IPv4-compatible ::/96, discard 100::/64, site-local, …).
const V6_RANGES = {
  unspecified: v6("::/128"),
  loopback: v6("::1/128"),
  // Local-use NAT64 (RFC 8215) and deprecated site-local: networks of the operator's own.
  private: v6("64:ff9b:1::/48", "fec0::/10"),
  "unique-local": v6("fc00::/7"),
  "link-local": v6("fe80::/10"),
  multicast: v6("ff00::/8"),
  documentation: v6("2001:db8::/32", "3fff::/20"),
  // IETF protocol assignments (Teredo, ORCHID, …) and all outside 2000::/3.
  reserved: v6("2001::/23", "::/3", "4000::/2", "8000::/1"),
} satisfies Partial<Record<IpClass, unknown>>

const NAT64 = ipaddr.IPv6.parseCIDR("64:ff9b::/96")
const SIX_TO_FOUR = ipaddr.IPv6.parseCIDR("2002::/16")

/** The IPv4 host an IPv6 address reaches, for the forms that embed one. */
const embeddedIPv4 = (ip: ipaddr.IPv6): ipaddr.IPv4 | undefined => {
  if (ip.isIPv4MappedAddress()) return ip.toIPv4Address()
  const bytes = ip.toByteArray()
  if (ip.match(NAT64)) return new ipaddr.IPv4(bytes.slice(12))
  if (ip.match(SIX_TO_FOUR)) return new ipaddr.IPv4(bytes.slice(2, 6)) // 2002:AABB:CCDD::/48
  return undefined
}

const classifyIPv4 = (ip: ipaddr.IPv4): IpClass => ipaddr.subnetMatch(ip, V4_RANGES, "public") as IpClass

/**
 * Literals as the runtime takes them: dotted quads without leading zeros or short forms
 * (`0x7f.1` is a host name to a socket), IPv6 with an optional `%zone`, in brackets or not.
 */
const parseIp = (input: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined => {
  const s = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input
  const family = isIP(s)
  if (family === 4 && s === input) return ipaddr.IPv4.parse(s)
  if (family !== 6) return undefined
  const ip = ipaddr.IPv6.parse(s)
  // ipaddr.js reads the deprecated IPv4-compatible `::a.b.c.d` as IPv4-mapped; it is the address
  // ::/96 (RFC 4291 2.5.5.1) that nothing routes, so it gets the bits it spells.
  return s.startsWith("::") && !s.slice(2).includes(":")
    ? new ipaddr.IPv6([0, 0, 0, 0, 0, 0, ip.parts[6]!, ip.parts[7]!])
    : ip
}

/** The class of an IP literal, or undefined when `ip` is not one. */
export const classifyIp = (ip: string): IpClass | undefined => {
  const parsed = parseIp(ip)
  if (parsed === undefined) return undefined
  if (parsed.kind() === "ipv4") return classifyIPv4(parsed as ipaddr.IPv4)
  const v6 = parsed as ipaddr.IPv6
  const inner = embeddedIPv4(v6)
  return inner ? classifyIPv4(inner) : ipaddr.subnetMatch(v6, V6_RANGES, "public") as IpClass
}
