/**
 * An HTTP server on loopback that misbehaves the way a broken or hostile provider does: never
 * answers, answers and then drips its body a byte at a time, sends an endless body, or announces
 * a huge one. Real sockets, so the deadlines and caps under test meet real TCP.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export type Misbehaviour =
  | { readonly kind: "silent" }
  | { readonly kind: "drip"; readonly status?: number; readonly everyMs?: number }
  | { readonly kind: "endless"; readonly status?: number }
  | { readonly kind: "declared"; readonly bytes: number }
  | { readonly kind: "json"; readonly status?: number; readonly body: string }

export interface HostileServer {
  readonly url: string
  /** Bytes written into response bodies so far (all requests). */
  readonly written: () => number
  readonly requests: () => number
  readonly close: () => Promise<void>
}

export const startHostileServer = async (behaviour: Misbehaviour): Promise<HostileServer> => {
  let written = 0
  let requests = 0
  const timers = new Set<NodeJS.Timeout>()
  const server = http.createServer((req, res) => {
    requests++
    req.resume()
    switch (behaviour.kind) {
      case "silent":
        return
      case "drip": {
        res.writeHead(behaviour.status ?? 200, { "content-type": "application/json" })
        const timer = setInterval(() => {
          written++
          res.write(" ")
        }, behaviour.everyMs ?? 50)
        timers.add(timer)
        res.on("close", () => clearInterval(timer))
        return
      }
      case "endless": {
        res.writeHead(behaviour.status ?? 200, { "content-type": "application/json" })
        const chunk = Buffer.alloc(64 * 1024, 0x20)
        const pump = () => {
          while (!res.destroyed && res.write(chunk)) written += chunk.length
          if (!res.destroyed) written += chunk.length
        }
        res.on("drain", pump)
        pump()
        return
      }
      case "declared":
        res.writeHead(200, { "content-type": "application/json", "content-length": String(behaviour.bytes) })
        res.write("{")
        written++
        return
      case "json":
        res.writeHead(behaviour.status ?? 200, { "content-type": "application/json" })
        written += Buffer.byteLength(behaviour.body)
        res.end(behaviour.body)
        return
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    written: () => written,
    requests: () => requests,
    close: async () => {
      for (const t of timers) clearInterval(t)
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
