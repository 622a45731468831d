/** The ports test/support/free-port.ts hands to spawned services (see there for why not listen(0)). */
import * as fs from "node:fs"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { freePort } from "../support/free-port.ts"

const ephemeralLow = (() => {
  try {
    return Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
  } catch {
    return 32_768
  }
})()

describe("freePort", () => {
  it("draws distinct ports below the kernel's ephemeral range that a server can bind on every interface", async () => {
    const ports = await Promise.all(Array.from({ length: 40 }, () => freePort()))
    expect(new Set(ports).size).toBe(ports.length)
    for (const port of ports) {
      expect(port).toBeLessThan(ephemeralLow)
      expect(port).toBeGreaterThanOrEqual(1_024)
    }
    const server = net.createServer()
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(ports[0], resolve))
    await new Promise((r) => server.close(r))
  })
})
