/**
 * Ports for servers that a test or bench starts in another process (`node src/main.ts`).
 *
 * `listen(0)` then `close()` is not enough: the kernel hands out that port from its ephemeral
 * range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 here), the same range it takes
 * the local port of every outgoing connection from. Between our close() and the child's listen(),
 * any client socket on the machine (the parallel test files open thousands) may be given it, and
 * the child dies with EADDRINUSE (CI, 2026-11-24: test/smtp/crash.test.ts). So ports are drawn at
 * random below the ephemeral range, where the kernel never assigns on its own, and each is
 * checked by binding it on every interface, as the service does. A process never hands out the
 * same port twice.
 */
import * as fs from "node:fs"
import * as net from "node:net"

/** Where the kernel's ephemeral range starts; 32768 (Linux's default) where /proc does not say. */
const ephemeralStart = (() => {
  try {
    const [low] = fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)
    const n = Number(low)
    return Number.isInteger(n) && n > 2_048 ? n : 32_768
  } catch {
    return 32_768
  }
})()
const lowest = Math.min(10_000, ephemeralStart - 1_024)

const handedOut = new Set<number>()

/** Whether `port` can be bound on every interface right now (as the service binds it). */
export const binds = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.createServer()
    s.once("error", () => resolve(false))
    s.listen(port, () => s.close(() => resolve(true)))
  })

/** A port nothing listens on, outside the range the kernel picks client ports from. */
export const freePort = async (): Promise<number> => {
  for (let tries = 0; tries < 200; tries++) {
    const port = lowest + Math.floor(Math.random() * (ephemeralStart - lowest))
    if (handedOut.has(port)) continue
    if (await binds(port)) {
      handedOut.add(port)
      return port
    }
  }
  throw new Error(`no free port in ${lowest}..${ephemeralStart - 1} after 200 tries`)
}
