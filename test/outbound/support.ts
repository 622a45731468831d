/**
 * Helpers of the outbound tests: a real local SMTP server (smtp-server on port 0) as the relay,
 * told per test which recipients to refuse and whether to fail or drop whole messages; a raw
 * server that drops the connection mid-DATA; the app pointed at it with a roomy send rate; and
 * money checks (balance = ledger sum, per-account ledger entries).
 */
import { Effect, Layer, Option } from "effect"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import { expect } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { returnPath } from "../../effects/bounces/verp.ts"
import type { Settings } from "../../effects/config.ts"
import { OutboundRateLimit } from "../../effects/outbound/limits.ts"
import { Database } from "../../effects/ports/Database.ts"
import type { RateLimit } from "../../effects/ratelimit/service.ts"
import { createAccount, type AccountOptions, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import type { ShiftedClock } from "../support/clock.ts"
import type { TestDatabase } from "../support/db.ts"

export interface Received {
  readonly from: string
  readonly to: ReadonlyArray<string>
  readonly raw: string
}

export interface RelayBehaviour {
  /** Recipients (lowercase) refused at RCPT TO with this code. */
  readonly refuse: Map<string, number>
  /** Refuse every message at MAIL FROM with this code. */
  mailFromCode: number | null
  /** Refuse every message after DATA with this code. */
  dataCode: number | null
  /** Refuse after DATA the transactions addressed to these recipients (lowercase), with this code. */
  readonly dataRefuse: Map<string, number>
  /** Answer each message this long after its last byte (a slow provider). */
  dataDelayMs: number
}

export interface TestRelay {
  readonly url: string
  readonly port: number
  readonly received: Array<Received>
  readonly behaviour: RelayBehaviour
  /** Messages received for `email` (envelope). */
  readonly to: (email: string) => ReadonlyArray<Received>
  /** The most messages that were being received (DATA started, not yet answered) at once since `reset`. */
  readonly mostAtOnce: () => number
  readonly reset: () => void
  readonly close: () => Promise<void>
}

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code })

export const startRelay = async (): Promise<TestRelay> => {
  const received: Array<Received> = []
  const behaviour: RelayBehaviour = { refuse: new Map(), mailFromCode: null, dataCode: null, dataRefuse: new Map(), dataDelayMs: 0 }
  let atOnce = 0
  let most = 0
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onMailFrom(_address, _session, callback) {
      if (behaviour.mailFromCode) return callback(smtpError(behaviour.mailFromCode, "sender refused"))
      callback()
    },
    onRcptTo(address, _session, callback) {
      const code = behaviour.refuse.get(address.address.toLowerCase())
      if (code) return callback(smtpError(code, code >= 500 ? "5.1.1 no such user" : "4.2.1 mailbox busy"))
      callback()
    },
    onData(stream, session, callback) {
      most = Math.max(most, ++atOnce)
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => setTimeout(() => {
        atOnce--
        if (behaviour.dataCode) return callback(smtpError(behaviour.dataCode, "message refused"))
        const refusedAtData = session.envelope.rcptTo.map((r) => behaviour.dataRefuse.get(r.address.toLowerCase())).find(Boolean)
        if (refusedAtData) return callback(smtpError(refusedAtData, "5.7.1 message content rejected"))
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString("utf8"),
        })
        callback()
      }, behaviour.dataDelayMs))
    },
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.server.address() as AddressInfo).port
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    received,
    behaviour,
    to: (email) => received.filter((r) => r.to.map((t) => t.toLowerCase()).includes(email.toLowerCase())),
    mostAtOnce: () => most,
    reset: () => {
      received.length = 0
      most = 0
      behaviour.dataDelayMs = 0
      behaviour.refuse.clear()
      behaviour.dataRefuse.clear()
      behaviour.mailFromCode = null
      behaviour.dataCode = null
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** A server that speaks just enough SMTP to take the envelope, then drops the connection mid-DATA. */
export const startDroppingServer = async (): Promise<{ url: string; close: () => Promise<void> }> => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => undefined)
    let inData = false
    socket.write("220 drop.test ESMTP\r\n")
    socket.on("data", (chunk) => {
      if (inData) return void socket.destroy()
      for (const line of chunk.toString("utf8").split("\r\n").filter(Boolean)) {
        const verb = line.slice(0, 4).toUpperCase()
        if (verb === "EHLO" || verb === "HELO") socket.write("250 drop.test\r\n")
        else if (verb === "DATA") {
          inData = true
          socket.write("354 go ahead\r\n")
        } else if (verb === "QUIT") socket.end("221 bye\r\n")
        else socket.write("250 ok\r\n")
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port
  return {
    url: `smtp://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/**
 * A server that takes whole messages and never answers the final dot: the provider has the
 * message but the sender never learns it (what a crash at the worst moment looks like).
 */
export const startHangingServer = async (): Promise<{ url: string; messages: () => number; close: () => Promise<void> }> => {
  const sockets = new Set<net.Socket>()
  let messages = 0
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => undefined)
    let inData = false
    let data = ""
    socket.write("220 hang.test ESMTP\r\n")
    socket.on("data", (chunk) => {
      if (inData) {
        data += chunk.toString("utf8")
        if (data.endsWith("\r\n.\r\n")) messages++
        return
      }
      for (const line of chunk.toString("utf8").split("\r\n").filter(Boolean)) {
        const verb = line.slice(0, 4).toUpperCase()
        if (verb === "EHLO" || verb === "HELO") socket.write("250 hang.test\r\n")
        else if (verb === "DATA") {
          inData = true
          socket.write("354 go ahead\r\n")
        } else socket.write("250 ok\r\n")
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages: () => messages,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** A loopback port nobody listens on (connection refused). */
export const closedPort = async (): Promise<number> => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** Roomy enough that no ordinary test hits it; rate-limit tests use the default. */
export const ROOMY_RATE: RateLimit = { limit: 100_000, window: "1 second" }

export interface OutboundAppOptions {
  /** A database kept across apps (restart tests). */
  readonly database?: TestDatabase
  /** The relay URL; undefined keeps the embedded capture transport. */
  readonly relayUrl?: string
  readonly rate?: RateLimit
  readonly clock?: ShiftedClock
  readonly settings?: Partial<Settings>
  readonly workers?: boolean
}

export const makeOutboundApp = (o: OutboundAppOptions = {}): Promise<TestApp> =>
  makeTestApp({
    workers: o.workers ?? false,
    ...(o.database ? { database: o.database } : {}),
    settings: { ...(o.relayUrl ? { smtpRelayUrl: Option.some(o.relayUrl) } : {}), ...o.settings },
    infrastructure: Layer.mergeAll(
      Layer.succeed(OutboundRateLimit, o.rate ?? ROOMY_RATE),
      o.clock ? o.clock.layer : Layer.empty,
    ) as Layer.Layer<any, never, never>,
  })

export const fund = (api: TestApp, userId: number, amount: number) =>
  api.run(Billing.use((b) => b.credit({ userId, amount, kind: "credit", reference: { type: "test" } })))

export const balance = (api: TestApp, userId: number) => api.run(Billing.use((b) => b.balance(userId)))

/** A verified account holding `amount` TZS. */
export const fundedAccount = async (api: TestApp, amount = 1000, options: AccountOptions = {}): Promise<TestAccount> => {
  const account = await createAccount(api, options)
  if (amount > 0) await fund(api, account.userId, amount)
  return account
}

export const query = <T = Record<string, unknown>>(api: TestApp, sql: string, params: ReadonlyArray<unknown> = []) =>
  api.run(Database.use((db) => db.query<T>(sql, params)))

/** Ledger entries of an account other than the funding credit, oldest first. */
export const movements = (api: TestApp, userId: number) =>
  query<{ kind: string; amount_tzs: number; reference_type: string; reference_id: string | null }>(
    api,
    "SELECT kind, amount_tzs, reference_type, reference_id FROM ledger_entries WHERE user_id = $1 AND reference_type <> 'test' ORDER BY id",
    [userId],
  )

/** Every wallet equals the sum of its ledger and none is negative. */
export const expectLedgerConsistent = async (api: TestApp) => {
  const broken = await query(api, `
    SELECT u.id FROM users u
      LEFT JOIN wallets w ON w.user_id = u.id
      LEFT JOIN (SELECT user_id, sum(amount_tzs) AS s FROM ledger_entries GROUP BY user_id) l ON l.user_id = u.id
     WHERE COALESCE(w.balance_tzs, 0) <> COALESCE(l.s, 0) OR COALESCE(w.balance_tzs, 0) < 0`)
  expect(broken).toEqual([])
}

/** Nothing of an account was written by outbound: no message, content, key or ledger movement. */
export const expectNothingWritten = async (api: TestApp, userId: number) => {
  const [counts] = await query<{ messages: number; contents: number; keys: number }>(
    api,
    `SELECT (SELECT count(*)::int8 FROM outbound_messages WHERE user_id = $1) AS messages,
            (SELECT count(*)::int8 FROM outbound_contents WHERE user_id = $1) AS contents,
            (SELECT count(*)::int8 FROM outbound_idempotency_keys WHERE user_id = $1) AS keys`,
    [userId],
  )
  expect(counts).toEqual({ messages: 0, contents: 0, keys: 0 })
  expect(await movements(api, userId)).toEqual([])
}

export const send = (api: TestApp, account: TestAccount, body: unknown, headers: Record<string, string> = {}) =>
  api.call("POST", "/api/outbound/emails", { token: account.apiKey, body, headers })

export const sendBatch = (api: TestApp, account: TestAccount, body: unknown, headers: Record<string, string> = {}) =>
  api.call("POST", "/api/outbound/emails/batch", { token: account.apiKey, body, headers })

export const detail = (api: TestApp, account: TestAccount, id: number) =>
  api.call("GET", `/api/outbound/emails/${id}`, { token: account.apiKey })

let counter = 0
/** A unique recipient address. */
export const rcpt = (p = "r") => `${p}${++counter}-${process.pid}@dest.example`

export const run = <A, E>(api: TestApp, effect: Effect.Effect<A, E, any>) => api.run(effect)

/** Polls until `check` holds (for work another connection or process finishes). */
export const eventually = async (check: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> => {
  const until = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > until) throw new Error("timed out waiting")
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** The VERP return path the app gives recipient `index` of message `emailId` (the MAIL FROM of its transaction). */
export const verp = (api: TestApp, emailId: number, index: number) =>
  returnPath({ secret: api.settings.secretsKey, domain: api.settings.platformDomain }, emailId, index)
