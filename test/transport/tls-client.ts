/**
 * A TLS client for the SMTP servers built on Node's own `net` and `tls`, independent of the
 * service's code: plaintext EHLO and STARTTLS, then a real handshake on the same socket (or
 * implicit TLS from the first byte), exposing the certificate the server served.
 */
import { X509Certificate } from "node:crypto"
import * as net from "node:net"
import * as tls from "node:tls"
import { generate } from "selfsigned"

export interface Reply {
  readonly code: number
  readonly lines: ReadonlyArray<string>
}

/** Reads SMTP replies (multi-line aware) from a socket, in order. */
const replies = (socket: net.Socket | tls.TLSSocket) => {
  let buffer = ""
  let lines: Array<string> = []
  const ready: Array<Reply> = []
  const waiting: Array<(r: Reply) => void> = []
  const onData = (chunk: Buffer) => {
    buffer += chunk.toString("latin1")
    let at: number
    while ((at = buffer.indexOf("\r\n")) >= 0) {
      const line = buffer.slice(0, at)
      buffer = buffer.slice(at + 2)
      lines.push(line)
      if (/^\d{3}(?: |$)/.test(line)) {
        const r = { code: Number(line.slice(0, 3)), lines }
        lines = []
        const w = waiting.shift()
        if (w) w(r)
        else ready.push(r)
      }
    }
  }
  socket.on("data", onData)
  return {
    next: () => new Promise<Reply>((resolve) => (ready.length ? resolve(ready.shift()!) : waiting.push(resolve))),
    stop: () => void socket.off("data", onData),
  }
}

export interface Session {
  readonly command: (line: string) => Promise<Reply>
  readonly close: () => void
}

const session = (socket: net.Socket | tls.TLSSocket, r: ReturnType<typeof replies>): Session => ({
  command: (line) => {
    socket.write(`${line}\r\n`)
    return r.next()
  },
  close: () => socket.destroy(),
})

/** EHLO keywords of a reply. */
export const features = (r: Reply) => r.lines.map((l) => l.slice(4))

export interface Secured extends Session {
  readonly certificate: X509Certificate
  /** Whether the served certificate verified against the given `ca` for `servername`. */
  readonly authorized: boolean
  readonly protocol: string | null
  readonly cipher: string
  /** The plaintext EHLO answer (before STARTTLS). */
  readonly plainEhlo: Reply
}

const handshake = (socket: tls.TLSSocket) =>
  new Promise<void>((resolve, reject) => {
    socket.once("secureConnect", () => resolve())
    socket.once("error", reject)
  })

const secured = (socket: tls.TLSSocket, plainEhlo: Reply, r = replies(socket)): Secured => {
  return {
    ...session(socket, r),
    certificate: socket.getPeerX509Certificate()!,
    authorized: socket.authorized,
    protocol: socket.getProtocol(),
    cipher: socket.getCipher().name,
    plainEhlo,
  }
}

/** Connects in plaintext, says EHLO, upgrades with STARTTLS. `ca` given: the certificate must verify for `servername`. */
export const startTls = async (port: number, servername: string, ca?: string): Promise<Secured> => {
  const socket = net.connect({ host: "127.0.0.1", port })
  socket.on("error", () => undefined)
  const r = replies(socket)
  const greeting = await r.next()
  if (greeting.code !== 220) throw new Error(`greeting ${greeting.code}`)
  socket.write("EHLO client.example.net\r\n")
  const ehlo = await r.next()
  socket.write("STARTTLS\r\n")
  const go = await r.next()
  if (go.code !== 220) throw new Error(`STARTTLS answered ${go.code} ${go.lines.join(" ")}`)
  r.stop()
  const secure = tls.connect({ socket, servername, ...(ca ? { ca } : {}), rejectUnauthorized: ca !== undefined })
  await handshake(secure)
  return secured(secure, ehlo)
}

/** Implicit TLS (SMTPS): the handshake first, then the greeting. */
export const implicitTls = async (port: number, servername: string, ca?: string): Promise<Secured> => {
  const secure = tls.connect({ host: "127.0.0.1", port, servername, ...(ca ? { ca } : {}), rejectUnauthorized: ca !== undefined })
  secure.on("error", () => undefined)
  await handshake(secure)
  const r = replies(secure)
  const greeting = await r.next()
  if (greeting.code !== 220) throw new Error(`greeting ${greeting.code}`)
  return secured(secure, { code: 0, lines: [] }, r)
}

/** Plaintext EHLO only (what is offered before TLS). */
export const plainEhlo = async (port: number): Promise<Reply & { readonly session: Session }> => {
  const socket = net.connect({ host: "127.0.0.1", port })
  socket.on("error", () => undefined)
  const r = replies(socket)
  await r.next()
  const s = session(socket, r)
  return { ...(await s.command("EHLO client.example.net")), session: s }
}

/** A self-signed certificate for `host`, as an operator would put in TLS_CERT_FILE / TLS_KEY_FILE. */
export const makeCertificate = async (host: string) => {
  const pems = await generate([{ name: "commonName", value: host }], {
    keySize: 2048,
    algorithm: "sha256",
    extensions: [{ name: "subjectAltName", altNames: [{ type: 2, value: host }] }],
  })
  return { cert: pems.cert, key: pems.private, fingerprint: new X509Certificate(pems.cert).fingerprint256 }
}
