/**
 * A small raw SMTP client over `net` for tests that need control nodemailer will not give:
 * pipelining many commands in one write, talking before the greeting, junk bytes, cutting the
 * connection in the middle of DATA. Replies are parsed (multi-line aware) and queued in order.
 */
import * as net from "node:net"

export interface SmtpReply {
  readonly code: number
  /** Text of the last line, without the code. */
  readonly text: string
  readonly lines: ReadonlyArray<string>
}

export interface RawSmtp {
  /** Writes bytes as they are (no CRLF added). */
  readonly write: (data: string | Uint8Array) => void
  /** Writes one command line and waits for its reply. */
  readonly command: (line: string) => Promise<SmtpReply>
  /** Waits for the next reply. */
  readonly reply: () => Promise<SmtpReply>
  /** Waits for the next `n` replies. */
  readonly replies: (n: number) => Promise<Array<SmtpReply>>
  /** Resolves when the server closed the connection. */
  readonly closed: Promise<void>
  readonly destroy: () => void
}

/** Message bytes as they go after DATA: CRLF line ends, leading dots doubled, the final dot line. */
export const dataBlock = (raw: Uint8Array | string): Buffer => {
  const text = Buffer.isBuffer(raw) ? raw.toString("latin1") : typeof raw === "string" ? raw : Buffer.from(raw).toString("latin1")
  const lines = text.replace(/\r\n/g, "\n").replace(/\r/g, "\n").split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  const body = lines.map((l) => (l.startsWith(".") ? `.${l}` : l)).join("\r\n")
  return Buffer.from(`${body}\r\n.\r\n`, "latin1")
}

export const connectSmtp = (port: number, options: { readonly waitGreeting?: boolean } = {}): Promise<RawSmtp & { greeting?: SmtpReply }> =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: "127.0.0.1" })
    const ready: Array<SmtpReply> = []
    const waiting: Array<{ resolve: (r: SmtpReply) => void; reject: (e: Error) => void }> = []
    let buffer = ""
    let lines: Array<string> = []
    let ended = false
    const closed = new Promise<void>((done) => socket.once("close", () => done()))
    socket.setEncoding("latin1")
    socket.on("data", (chunk: string) => {
      buffer += chunk
      let at: number
      while ((at = buffer.indexOf("\r\n")) >= 0) {
        const line = buffer.slice(0, at)
        buffer = buffer.slice(at + 2)
        lines.push(line)
        if (/^\d{3} /.test(line) || /^\d{3}$/.test(line)) {
          const r = { code: Number(line.slice(0, 3)), text: line.slice(4), lines }
          lines = []
          const w = waiting.shift()
          if (w) w.resolve(r)
          else ready.push(r)
        }
      }
    })
    socket.on("error", () => undefined)
    socket.once("close", () => {
      ended = true
      for (const w of waiting.splice(0)) w.reject(new Error("connection closed"))
    })
    const reply = () =>
      new Promise<SmtpReply>((res, rej) => {
        const r = ready.shift()
        if (r) return res(r)
        if (ended) return rej(new Error("connection closed"))
        waiting.push({ resolve: res, reject: rej })
      })
    const client: RawSmtp = {
      write: (data) => void socket.write(data),
      command: (line) => {
        socket.write(`${line}\r\n`)
        return reply()
      },
      reply,
      replies: async (n) => {
        const out: Array<SmtpReply> = []
        for (let i = 0; i < n; i++) out.push(await reply())
        return out
      },
      closed,
      destroy: () => socket.destroy(),
    }
    socket.once("connect", () => {
      if (options.waitGreeting === false) return resolve(client)
      reply().then((greeting) => resolve({ ...client, greeting }), reject)
    })
    socket.once("error", reject)
  })

export interface SentMail {
  readonly mail: SmtpReply
  readonly rcpts: ReadonlyArray<SmtpReply>
  /** Undefined when no recipient was accepted (DATA not attempted). */
  readonly data?: SmtpReply
}

/** One whole transaction on an open session (EHLO done by the caller or here with `ehlo`). */
export const transaction = async (
  smtp: RawSmtp,
  input: { readonly from: string; readonly to: ReadonlyArray<string>; readonly raw: Uint8Array | string },
): Promise<SentMail> => {
  const mail = await smtp.command(`MAIL FROM:<${input.from}>`)
  const rcpts: Array<SmtpReply> = []
  for (const to of input.to) rcpts.push(await smtp.command(`RCPT TO:<${to}>`))
  if (!rcpts.some((r) => r.code === 250)) {
    await smtp.command("RSET")
    return { mail, rcpts }
  }
  const go = await smtp.command("DATA")
  if (go.code !== 354) return { mail, rcpts, data: go }
  smtp.write(dataBlock(input.raw))
  return { mail, rcpts, data: await smtp.reply() }
}

/** Connects, EHLOs, runs one transaction and QUITs. */
export const sendRaw = async (
  port: number,
  input: { readonly from: string; readonly to: ReadonlyArray<string>; readonly raw: Uint8Array | string; readonly helo?: string },
): Promise<SentMail> => {
  const smtp = await connectSmtp(port)
  try {
    await smtp.command(`EHLO ${input.helo ?? "client.example.net"}`)
    const sent = await transaction(smtp, input)
    await smtp.command("QUIT").catch(() => undefined)
    return sent
  } finally {
    smtp.destroy()
  }
}

/**
 * Throws junk at an SMTP server the way scanners do: 2,000 random bytes and a dozen unknown
 * commands on one connection, then an HTTP request on another. Returns the last reply code of
 * each (a well-behaved server ends both with 421 and closes).
 */
export const throwJunk = async (port: number): Promise<{ readonly junk: number | undefined; readonly http: number }> => {
  const { randomBytes } = await import("node:crypto")
  const junk = await connectSmtp(port)
  junk.write(Buffer.concat([randomBytes(2000), Buffer.from("\r\n")]))
  for (let i = 0; i < 12; i++) junk.write(`XYZZY ${i}\r\n`)
  const codes: Array<number> = []
  for (;;) {
    const r = await junk.reply().catch(() => undefined)
    if (!r) break
    codes.push(r.code)
  }
  const http = await connectSmtp(port)
  http.write("GET / HTTP/1.1\r\nHost: smtp\r\n\r\n")
  const httpCode = (await http.reply()).code
  await http.closed
  return { junk: codes.at(-1), http: httpCode }
}
