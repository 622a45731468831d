/**
 * Requests Node's HTTP parser refuses before Hono ever sees them: a request line or headers over
 * the parser's limit, malformed HTTP, a client too slow to send its headers. Node would answer
 * those with a bare status line; here they get the envelope like every other answer
 * (DECISIONS.md "Envelope and HTTP", "Hostile input"), then the connection is closed, since
 * the parser cannot tell where the broken request ends.
 */
import type { Server } from "node:http"
import type { Duplex } from "node:stream"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { envelope } from "./envelope.ts"

/**
 * A request line longer than this, when the headers overflow, is the culprit: 414 rather than
 * 431. (Node's parser limit covers the request line and the headers together, 16 KiB by default.)
 */
export const MAX_REQUEST_LINE_BYTES = 8 * 1024

interface ParserError extends Error {
  readonly code?: string
  /** The chunk being parsed when the parser gave up. */
  readonly rawPacket?: Buffer
}

interface Answer {
  readonly status: number
  readonly reason: string
  readonly code: string
  readonly message: string
}

const REQUEST_LINE_START = /^[A-Z]+ /

/** Whether the request line itself is what overflowed (its end not reached, or too long). */
const requestLineTooLong = (packet: Buffer | undefined): boolean => {
  if (!packet || !REQUEST_LINE_START.test(packet.subarray(0, 16).toString("latin1"))) return false
  const end = packet.indexOf("\r\n")
  return end === -1 || end > MAX_REQUEST_LINE_BYTES
}

/** What to answer for a parser error; undefined when the connection is simply gone. */
export const answerFor = (err: ParserError): Answer | undefined => {
  switch (err.code) {
    case "ECONNRESET":
    case "EPIPE":
      return undefined
    case "HPE_HEADER_OVERFLOW":
      return requestLineTooLong(err.rawPacket)
        ? { status: 414, reason: "URI Too Long", code: "URI_TOO_LONG", message: "the request line is too long" }
        : { status: 431, reason: "Request Header Fields Too Large", code: "HEADER_FIELDS_TOO_LARGE", message: "the request headers are too large" }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, reason: "Request Timeout", code: "REQUEST_TIMEOUT", message: "the request was not received in time" }
    default:
      return { status: 400, reason: "Bad Request", code: "BAD_REQUEST", message: "malformed HTTP request" }
  }
}

/** The raw HTTP answer: the envelope as JSON, with the request id also as a header. */
export const rawAnswer = (a: Answer, requestId: string): string => {
  const body = JSON.stringify(
    envelope(requestId, { success: false, message: a.message, errors: [{ code: a.code, message: a.message }] }),
  )
  return [
    `HTTP/1.1 ${a.status} ${a.reason}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${requestId}`,
    "Connection: close",
    "",
    body,
  ].join("\r\n")
}

/**
 * Answers the parser's refusals on `server` with the envelope. `onAnswered` hears of each one
 * (for the request log), since no route or middleware runs for them.
 */
export const answerClientErrors = (
  server: Pick<Server, "on">,
  onAnswered: (entry: { readonly status: number; readonly code: string; readonly requestId: string }) => void = () => {},
): void => {
  server.on("clientError", (err: ParserError, socket: Duplex) => {
    const answer = answerFor(err)
    if (answer === undefined || !socket.writable) {
      socket.destroy()
      return
    }
    const requestId = `req_${randomHexSync(12)}`
    socket.end(rawAnswer(answer, requestId))
    onAnswered({ status: answer.status, code: answer.code, requestId })
  })
}

type Fetch = (request: Request, env?: unknown) => Response | Promise<Response>

/**
 * A request body the route never read (a body sent to a route that takes none) is drained by the
 * server for a moment and then its connection is dropped; a client reusing that keep-alive
 * connection would see its next request fail. So such answers say `Connection: close` (RFC 9112
 * §9.6), and the client opens a fresh connection instead.
 */
export const closeWhenBodyUnread = (fetch: Fetch): Fetch => async (request, env) => {
  const res = await fetch(request, env)
  const length = request.headers.get("content-length")
  const hasBody = request.headers.has("transfer-encoding") || (length !== null && length !== "0")
  if (!hasBody || request.bodyUsed) return res
  const headers = new Headers(res.headers)
  headers.set("connection", "close")
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers })
}
