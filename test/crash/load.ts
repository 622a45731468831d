/**
 * The mixed load of the crash trials, and the client's record of what the service acknowledged.
 * Everything goes over the wire: accounts are registered and verified over HTTP (the link comes
 * through the relay), mail goes to the MX over SMTP, sends and batches and top-ups over the API,
 * payment outcomes as signed gateway events. Each operation carries a unique token (Message-ID
 * for inbound mail, a subject word for sends) so the checks can find its rows in the database
 * without relying on how the service names them.
 */
import { connectSmtp, dataBlock } from "../support/smtp-client.ts"
import type { CrashGateway, EventDelivery, PaymentEventName } from "./gateway.ts"
import type { CrashReceiver } from "./receiver.ts"
import type { CrashRelay } from "./relay.ts"
import { REFUSED_AT_DATA } from "./relay.ts"
import type { Rng } from "./rng.ts"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Open while the service is up; load loops wait on it while the service is down. */
export class Gate {
  private open = false
  private waiters: Array<() => void> = []
  readonly up = () => {
    this.open = true
    for (const w of this.waiters.splice(0)) w()
  }
  readonly down = () => {
    this.open = false
  }
  readonly wait = (): Promise<void> => (this.open ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve)))
  readonly isOpen = () => this.open
}

export interface HttpAnswer {
  readonly status: number
  // deno-lint-ignore no-explicit-any
  readonly body: any
}

export const call = async (
  base: string,
  method: string,
  path: string,
  options: { readonly body?: unknown; readonly bearer?: string; readonly key?: string } = {},
): Promise<HttpAnswer> => {
  const headers: Record<string, string> = {}
  if (options.body !== undefined) headers["content-type"] = "application/json"
  if (options.bearer) headers.authorization = `Bearer ${options.bearer}`
  if (options.key) headers["x-api-key"] = options.key
  const res = await fetch(base + path, {
    method,
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch { /* not JSON */ }
  return { status: res.status, body }
}

const must = (what: string, a: HttpAnswer, status: number) => {
  if (a.status !== status) throw new Error(`${what}: expected HTTP ${status}, got ${a.status}: ${JSON.stringify(a.body).slice(0, 500)}`)
  return a.body.data
}

export interface LoadAddress {
  readonly id: number
  readonly email: string
  readonly webhookIds: ReadonlyArray<number>
}

export interface LoadAccount {
  readonly userId: number
  readonly email: string
  readonly apiKey: string
  readonly addresses: ReadonlyArray<LoadAddress>
}

/** One SMTP transaction to the MX, as the client saw it. */
export interface InboundAttempt {
  /** The Message-ID without brackets, lowercase: how the checks find its rows. */
  readonly token: string
  readonly recipients: ReadonlyArray<string>
  /** Addresses whose RCPT was answered 250. */
  readonly acceptedAddressIds: Set<number>
  /** A recipient the client does not know as an address was answered 250 (reported by the checks). */
  acceptedUnknown: boolean
  /**
   * acked: 250 after DATA. refused: no recipient accepted, DATA not sent. rejected: DATA
   * answered with a non-250 reply. unknown: the connection broke before the final reply.
   */
  outcome: "pending" | "acked" | "refused" | "rejected" | "unknown"
  /** The message ids the 250 names (`stored as 12,13`), or null if it names none. */
  ackIds: ReadonlyArray<number> | null
  dataReply: string
}

/** One send or batch over the API, as the client saw it. */
export interface OutboundAttempt {
  /** A word in the subject: how the checks find the send's content row. */
  readonly token: string
  readonly kind: "single" | "batch"
  readonly userId: number
  readonly recipients: ReadonlyArray<string>
  readonly relayRefuses: boolean
  /** HTTP status, 0 when the request broke (connection cut by a kill, timeout). */
  status: number
  // deno-lint-ignore no-explicit-any
  data: any
}

/** A top-up whose checkout link reached the client, and what the gateway decided for it. */
export interface TopupRecord {
  readonly userId: number
  readonly topupId: number
  readonly providerReference: string
  readonly amount: number
  readonly intended: PaymentEventName
  readonly primary: EventDelivery
  conflicting: EventDelivery | undefined
}

export interface LoadRecords {
  readonly inbound: Array<InboundAttempt>
  readonly outbound: Array<OutboundAttempt>
  readonly topups: Array<TopupRecord>
  /** Top-up requests that broke or failed (no checkout link reached the client). */
  topupRequestsUnanswered: number
}

export interface LoadContext {
  readonly serviceUrl: string
  readonly mxPort: number
  readonly platformDomain: string
  readonly runId: string
  readonly gate: Gate
  readonly relay: CrashRelay
  readonly gateway: CrashGateway
  readonly receiver: CrashReceiver
  readonly records: LoadRecords
}

/** Registers, verifies (link from the relay), keys, addresses and webhooks; funds through the gateway. */
export const setupAccounts = async (ctx: LoadContext, count: number, initialTopup: number): Promise<Array<LoadAccount>> => {
  const accounts: Array<LoadAccount> = []
  for (let i = 0; i < count; i++) {
    const email = `owner${i}-${ctx.runId}@customer.test`
    const registered = must("register", await call(ctx.serviceUrl, "POST", "/api/auth/register", {
      body: { name: `Crash Owner ${i}`, email, password: "a long crash-test passphrase" },
    }), 200)
    const jwt: string = registered.token
    let link: string | undefined
    for (let t = 0; t < 200 && !link; t++) {
      link = ctx.relay.verificationToken(email)
      if (!link) await sleep(50)
    }
    if (!link) throw new Error(`no verification mail for ${email} reached the relay`)
    must("verify email", await call(ctx.serviceUrl, "POST", "/api/auth/email/verify", { body: { token: link } }), 200)
    const key: string = must("api key", await call(ctx.serviceUrl, "POST", "/api/apikeys", { bearer: jwt, body: { name: "crash" } }), 201).key
    const addresses: Array<LoadAddress> = []
    // Address 0 has two webhooks, address 1 one, address 2 none.
    for (const [a, hooks] of [2, 1, 0].entries()) {
      const local = `c${i}a${a}-${ctx.runId}`
      const address = must("address", await call(ctx.serviceUrl, "POST", "/api/inbound/addresses", { key, body: { local_part: local } }), 201)
      const webhookIds: Array<number> = []
      for (let h = 0; h < hooks; h++) {
        const secret = `whsec_crash_${ctx.runId}_${i}_${a}_${h}`
        const hook = must("webhook", await call(ctx.serviceUrl, "POST", "/api/webhook/webhooks", {
          key,
          body: { address_id: address.id, url: `${ctx.receiver.url}/hook/${local}/${h}`, secret },
        }), 201)
        ctx.receiver.secretFor(hook.id, secret)
        webhookIds.push(hook.id)
      }
      addresses.push({ id: address.id, email: `${local}@${ctx.platformDomain}`, webhookIds })
    }
    accounts.push({ userId: registered.user.id, email, apiKey: key, addresses })
  }
  for (const account of accounts) {
    const record = await topup(ctx, account, initialTopup, "payment.completed", false, false)
    if (!record) throw new Error("the initial top-up was not created")
    for (let t = 0; t < 400 && record.primary.status === 0; t++) await sleep(50)
    if (record.primary.status !== 200) throw new Error(`the initial top-up event was answered ${record.primary.status}`)
  }
  return accounts
}

let eventCounter = 0

/** Creates a top-up over the API; when the checkout link came back, queues the gateway's outcome event. */
const topup = async (
  ctx: LoadContext,
  account: LoadAccount,
  amount: number,
  intended: PaymentEventName,
  replay: boolean,
  conflict: boolean,
): Promise<TopupRecord | undefined> => {
  let answer: HttpAnswer
  try {
    answer = await call(ctx.serviceUrl, "POST", "/api/billing/topup", { key: account.apiKey, body: { amount_tzs: amount } })
  } catch {
    ctx.records.topupRequestsUnanswered++
    return undefined
  }
  if (answer.status !== 201) {
    ctx.records.topupRequestsUnanswered++
    return undefined
  }
  const providerReference: string = answer.body.data.provider_reference
  const event = {
    id: `evt_${ctx.runId}_${++eventCounter}`,
    event: intended,
    provider_reference: providerReference,
    amount_tzs: amount,
    occurred_at: new Date().toISOString(),
  }
  let record: TopupRecord | undefined = undefined
  const onAck = conflict
    ? () => {
      // After the outcome was acknowledged, the gateway contradicts itself: the service must ignore it.
      record!.conflicting = ctx.gateway.emit({
        ...event,
        id: `evt_${ctx.runId}_${++eventCounter}`,
        event: intended === "payment.completed" ? "payment.failed" : "payment.completed",
        occurred_at: new Date().toISOString(),
      })
    }
    : undefined
  const primary = ctx.gateway.emit(event, onAck)
  record = { userId: account.userId, topupId: answer.body.data.topup.id, providerReference, amount, intended, primary, conflicting: undefined }
  // A replay of the very same event (same id), as gateways do when they miss an answer.
  if (replay) ctx.gateway.emit(event)
  ctx.records.topups.push(record)
  return record
}

const attachmentPart = (boundary: string, rng: Rng) => {
  const bytes = Buffer.alloc(rng.between(200, 6000))
  for (let i = 0; i < bytes.length; i++) bytes[i] = rng.int(256)
  const b64 = bytes.toString("base64").replace(/.{76}/g, "$&\r\n")
  return `--${boundary}\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="blob.bin"\r\n` +
    `Content-Transfer-Encoding: base64\r\n\r\n${b64}\r\n`
}

const composeInbound = (token: string, to: string, rng: Rng): string => {
  const lines: Array<string> = []
  const n = rng.between(1, 60)
  for (let i = 0; i < n; i++) lines.push(`Line ${i} of a crash-trial message: habari ya leo, mzigo umefika salama.`)
  const head = [
    "From: Load Sender <sender@load.test>",
    `To: ${to}`,
    `Subject: crash inbound ${token.split("@")[0]}`,
    `Message-ID: <${token}>`,
    `Date: ${new Date().toUTCString()}`,
    "MIME-Version: 1.0",
  ]
  if (!rng.chance(0.2)) return [...head, "Content-Type: text/plain; charset=utf-8", "", ...lines, ""].join("\r\n")
  const boundary = `b_${token.split("@")[0]}`
  return [
    ...head,
    `Content-Type: multipart/mixed; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    "Content-Type: text/plain; charset=utf-8",
    "",
    ...lines,
    attachmentPart(boundary, rng) + `--${boundary}--`,
    "",
  ].join("\r\n")
}

export interface LoadOptions {
  readonly inboundSessions: number
  /** Pause after each inbound transaction: up to twice this, at random. */
  readonly inboundPauseMs: number
  readonly outboundPauseMs: number
  readonly topupPauseMs: number
}

export interface RunningLoad {
  /** Stops generating new work and waits for the loops to finish their current operation. */
  readonly stop: () => Promise<void>
}

/** Starts the load loops; they run until `stop`, pausing while the gate is closed. */
export const startLoad = (ctx: LoadContext, accounts: ReadonlyArray<LoadAccount>, rng: Rng, options: LoadOptions): RunningLoad => {
  let stopped = false
  let stopSignal: () => void = () => undefined
  const stopping = new Promise<void>((resolve) => (stopSignal = resolve))
  const waitUp = () => Promise.race([ctx.gate.wait(), stopping])
  let inboundCounter = 0
  let outboundCounter = 0
  const addresses = accounts.flatMap((a) => a.addresses)
  const addressOf = new Map(addresses.map((a) => [a.email.split("@")[0]!, a]))

  const recipientsFor = (): Array<string> => {
    const picked = new Set<string>()
    const n = rng.chance(0.7) ? 1 : rng.between(2, 3)
    for (let i = 0; i < n; i++) {
      const a = rng.pick(addresses)
      const [local, domain] = a.email.split("@")
      // A subaddress reaches the same inbox: stored and charged once per address all the same.
      picked.add(rng.chance(0.1) ? `${local}+tag${rng.int(9)}@${domain}` : a.email)
    }
    if (rng.chance(0.05)) picked.add(`nobody-${rng.int(1000)}@${ctx.platformDomain}`)
    return [...picked]
  }

  const inboundSession = async () => {
    while (!stopped) {
      await waitUp()
      if (stopped) break
      let smtp: Awaited<ReturnType<typeof connectSmtp>> | undefined
      try {
        smtp = await connectSmtp(ctx.mxPort)
        if (smtp.greeting?.code !== 220) throw new Error(`greeting ${smtp.greeting?.code}`)
        const ehlo = await smtp.command("EHLO load.test")
        if (ehlo.code !== 250) throw new Error(`EHLO ${ehlo.code}`)
      } catch {
        smtp?.destroy()
        await sleep(100)
        continue
      }
      const transactions = rng.between(1, 4)
      for (let t = 0; t < transactions && !stopped; t++) {
        const token = `crash-${ctx.runId}-i${++inboundCounter}@load.test`
        const recipients = recipientsFor()
        const attempt: InboundAttempt = {
          token,
          recipients,
          acceptedAddressIds: new Set(),
          acceptedUnknown: false,
          outcome: "pending",
          ackIds: null,
          dataReply: "",
        }
        ctx.records.inbound.push(attempt)
        try {
          // Step by step, so what was accepted is known even when a kill cuts the session mid-way.
          const mail = await smtp.command("MAIL FROM:<sender@load.test>")
          if (mail.code !== 250) throw new Error(`MAIL FROM ${mail.code}`)
          for (const rcpt of recipients) {
            const r = await smtp.command(`RCPT TO:<${rcpt}>`)
            if (r.code !== 250) continue
            const address = addressOf.get(rcpt.split("@")[0]!.replace(/\+.*$/, ""))
            if (address) attempt.acceptedAddressIds.add(address.id)
            else attempt.acceptedUnknown = true
          }
          if (attempt.acceptedAddressIds.size === 0 && !attempt.acceptedUnknown) {
            attempt.outcome = "refused"
            await smtp.command("RSET")
            continue
          }
          const go = await smtp.command("DATA")
          if (go.code !== 354) {
            attempt.outcome = "rejected"
            attempt.dataReply = `${go.code} ${go.text}`
            continue
          }
          smtp.write(dataBlock(composeInbound(token, recipients[0]!, rng)))
          const data = await smtp.reply()
          attempt.dataReply = `${data.code} ${data.text}`
          if (data.code === 250) {
            attempt.outcome = "acked"
            const ids = /stored as ([\d, ]+)/.exec(data.text)?.[1]
            attempt.ackIds = ids ? ids.split(",").map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0) : null
          } else {
            attempt.outcome = "rejected"
          }
        } catch {
          attempt.outcome = "unknown"
          break
        }
        await sleep(rng.int(2 * options.inboundPauseMs + 1))
      }
      await smtp.command("QUIT").catch(() => undefined)
      smtp.destroy()
    }
  }

  const outboundLoop = async (account: LoadAccount) => {
    while (!stopped) {
      await waitUp()
      if (stopped) break
      const batch = rng.chance(0.35)
      const token = `o${++outboundCounter}x${ctx.runId}`
      const relayRefuses = rng.chance(batch ? 0.05 : 0.08)
      const n = batch ? rng.between(2, 6) : rng.between(1, 2)
      const to: Array<string> = []
      for (let i = 0; i < n; i++) to.push(`r${outboundCounter}-${i}@dest.test`)
      if (rng.chance(0.15)) to.push(`reject-${outboundCounter}@dest.test`)
      const body: Record<string, unknown> = {
        to,
        subject: `crash outbound ${token}${relayRefuses ? ` ${REFUSED_AT_DATA}` : ""}`,
        text_body: `Habari, this is crash-trial send ${token}.`,
      }
      if (!batch && rng.chance(0.1)) body.cc = [`cc${outboundCounter}@dest.test`]
      if (!batch && rng.chance(0.1)) body.bcc = [`bcc${outboundCounter}@dest.test`]
      const recipients = [...to, ...((body.cc as Array<string>) ?? []), ...((body.bcc as Array<string>) ?? [])]
      const attempt: OutboundAttempt = { token, kind: batch ? "batch" : "single", userId: account.userId, recipients, relayRefuses, status: 0, data: undefined }
      ctx.records.outbound.push(attempt)
      try {
        const a = await call(ctx.serviceUrl, "POST", batch ? "/api/outbound/emails/batch" : "/api/outbound/emails", { key: account.apiKey, body })
        attempt.status = a.status
        attempt.data = a.body?.data
      } catch {
        attempt.status = 0
      }
      await sleep(options.outboundPauseMs + rng.int(options.outboundPauseMs))
    }
  }

  const topupLoop = async () => {
    while (!stopped) {
      await waitUp()
      if (stopped) break
      const account = rng.pick(accounts)
      const amount = 2000 + 500 * rng.int(17)
      const intended: PaymentEventName = rng.chance(0.85) ? "payment.completed" : "payment.failed"
      await topup(ctx, account, amount, intended, rng.chance(0.1), rng.chance(0.1))
      await sleep(options.topupPauseMs + rng.int(options.topupPauseMs))
    }
  }

  const loops = [
    ...Array.from({ length: options.inboundSessions }, () => inboundSession()),
    ...accounts.map((a) => outboundLoop(a)),
    topupLoop(),
  ]
  return {
    stop: async () => {
      stopped = true
      stopSignal()
      await Promise.all(loops)
    },
  }
}
