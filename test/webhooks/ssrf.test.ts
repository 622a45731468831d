/** The SSRF classifier (effects/shared/ssrf.ts) and the creation-time URL rule (effects/webhooks/url.ts). */
import { Result } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { classifyIp } from "../../effects/shared/ssrf.ts"
import { checkWebhookUrl } from "../../effects/webhooks/url.ts"

describe("classifyIp", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["0.0.0.0", "unspecified"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "link-local"],
    ["100.64.0.1", "cgnat"],
    ["100.127.255.255", "cgnat"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.10", "documentation"],
    ["198.18.0.1", "reserved"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["fc00::1", "unique-local"],
    ["fd12:3456:789a::1", "unique-local"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "link-local"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["2002:7f00:1::1", "loopback"],
    ["2001:db8::1", "documentation"],
    ["[::1]", "loopback"],
    ["8.8.8.8", "public"],
    ["172.32.0.1", "public"],
    ["100.128.0.1", "public"],
    ["2606:4700:4700::1111", "public"],
    ["::ffff:8.8.8.8", "public"],
    ["64:ff9b::8.8.8.8", "public"],
    ["64:ff9b::10.0.0.1", "private"],
    ["64:ff9b:1::1", "private"],
    ["2002:c0a8:101::1", "private"],
    ["2002:808:808::1", "public"],
    ["fec0::1", "private"],
    ["3fff::1", "documentation"],
    ["2001::1", "reserved"],
    ["100::1", "reserved"],
    ["4000::1", "reserved"],
    ["::7f00:1", "reserved"],
    // The deprecated IPv4-compatible spelling is ::/96, whatever IPv4 it spells.
    ["::127.0.0.1", "reserved"],
    ["::8.8.8.8", "reserved"],
    ["::0.0.0.1", "loopback"],
    ["::0.0.0.0", "unspecified"],
  ])("%s is %s", (ip, cls) => {
    expect(classifyIp(ip)).toBe(cls)
  })

  it.each([
    "example.com", "1.2.3", "256.1.1.1", "01.2.3.4", "1:2:3:4:5:6:7:8:9", "1::2::3", "::ffff:1.2.3.256", "gggg::1", "",
    "::ffff:0x7f.0.0.1", "::ffff:01.2.3.4", "[1.2.3.4]", " 1.2.3.4",
  ])(
    "%j is not an IP literal",
    (s) => {
      expect(classifyIp(s)).toBeUndefined()
    },
  )

  it("takes every IPv6 form node:net takes, an IPv4 tail as the last 32 bits", () => {
    for (const ip of ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "a:b::c:d"]) {
      expect(net.isIPv6(ip)).toBe(true)
      expect(classifyIp(ip)).toBeDefined()
    }
    // The tail lands where a NAT64 prefix expects its IPv4 host.
    expect(classifyIp("64:ff9b::169.254.169.254")).toBe("link-local")
    expect(classifyIp("64:ff9b:0:0:0:0:127.0.0.1")).toBe("loopback")
  })
})

describe("checkWebhookUrl", () => {
  const ok = (url: string, allowPrivate = false) => Result.isSuccess(checkWebhookUrl(url, allowPrivate))
  it("accepts public http/https URLs, and host names whatever they resolve to (checked at delivery)", () => {
    expect(ok("https://hooks.example.com/in?x=1")).toBe(true)
    expect(ok("http://8.8.8.8:8080/hook")).toBe(true)
    expect(ok("http://localhost:3000/hook")).toBe(true)
  })
  it("refuses other schemes, credentials, long URLs and literal private addresses", () => {
    for (const url of ["ftp://example.com", "javascript:alert(1)", "data:text/plain,hi", "https://u:p@example.com", `https://e.com/${"a".repeat(2100)}`]) {
      expect(ok(url, true)).toBe(false)
    }
    for (const url of ["http://127.0.0.1/", "http://[::1]/", "http://0177.0.0.1/", "http://0x7f000001/", "http://[::ffff:192.168.0.1]/", "http://0/"]) {
      expect(ok(url)).toBe(false)
      expect(ok(url, true)).toBe(true)
    }
    expect(ok("https://exa mple.com/")).toBe(false)
  })
})
