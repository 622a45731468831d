/**
 * What must hold in the database after any crash, checked while the service is down (so the
 * tables hold exactly what was committed), against what the clients were told and what the
 * relay, the gateway and the webhook receiver saw. `final` adds what must hold once the service
 * ran again with the load stopped and its queues drained. Each violation is a sentence naming
 * the rows; an empty list is a pass.
 *
 * Money
 * - Every account: wallet balance = sum of its ledger entries, and ≥ 0.
 * Inbound (tokens are the Message-IDs the load generator made unique)
 * - A transaction answered 250 after DATA is stored exactly once for each address whose RCPT
 *   got 250 (subaddresses and repeats collapse to one), and the ids the 250 names ("stored as
 *   …", when it names any) are exactly those rows.
 * - A transaction refused (no recipient accepted, or a non-250 after DATA) stored nothing; one cut
 *   by a kill before its reply stored all of its accepted addresses or none; no Message-ID is
 *   stored twice for one address; no row that no client sent.
 * - Every stored message has exactly one ledger entry, a 5 TZS debit of its account, and every
 *   inbound debit points at a stored message; each address's message/unread counters equal its rows.
 * Payments
 * - A top-up is credited once with its amount if completed, never otherwise, and a completed one
 *   has exactly one applied `payment.completed` event; no event id is accepted twice.
 * - A top-up whose checkout reached the client exists with the gateway's reference; once its
 *   event was acknowledged it is in that event's state, and a later contradicting event is
 *   answered 200 `ignored` (or `duplicate`) and changes nothing; no event is answered 4xx.
 * Webhooks (at-least-once, each attempt at most once)
 * - Every stored message has exactly one `inbound.message_received` delivery row per webhook of
 *   its address (all are active), none for addresses without.
 * - The receiver got at most `attempt` requests for a delivery (an attempt is counted before its
 *   request, so a crash never repeats one), each with the row's message/webhook/address ids and a
 *   valid X-Signature, and none for a delivery id that does not exist.
 * - `delivered` only if the receiver answered 2xx to one of its requests; `failed` only after all
 *   WEBHOOK_MAX_ATTEMPTS attempts were taken. More than one 2xx per delivery is allowed (a kill
 *   between the receiver's answer and the record) and counted.
 * - final: none is left `pending` or `retrying`.
 * Outbound
 * - Per message: amount_tzs = 5 × charged recipients not failed; the refunds recorded for it sum to
 *   5 × its failed charged recipients; `queued` has all charged recipients queued, `sent` at
 *   least one sent and none queued, `failed` none sent. Per send (content): the debits
 *   (per message for a single send, one per batch) sum to 5 × its charged recipients.
 * - Every recipient recorded `sent` was taken by the relay (Message-ID and RCPT); more than one
 *   copy (a re-dispatch after a crash) is allowed and counted.
 * - A call answered 201 has exactly the messages and statuses it named; 502: all its messages
 *   failed and fully refunded; 4xx: nothing written. A call cut by a kill, or answered another
 *   5xx, has an unknown outcome: only the rules above apply to what it wrote.
 * - final: nothing left `queued`, so every charged recipient is sent or refunded.
 */
import type postgres from "postgres"
import type { CrashGateway } from "./gateway.ts"
import type { LoadAccount, LoadRecords } from "./load.ts"
import type { CrashReceiver } from "./receiver.ts"
import type { CrashRelay } from "./relay.ts"

export const PRICE = 5

export interface CheckInput {
  readonly sql: postgres.Sql
  readonly accounts: ReadonlyArray<LoadAccount>
  readonly records: LoadRecords
  readonly relay: CrashRelay
  readonly receiver: CrashReceiver
  readonly gateway: CrashGateway
  readonly webhookMaxAttempts: number
  /** After the drain: every queue must be empty. */
  readonly final: boolean
}

export interface CheckCounts {
  readonly accounts: number
  readonly inboundAcked: number
  readonly inboundAckedWithoutIds: number
  readonly inboundRefusedOrRejected: number
  readonly inboundUnknown: number
  /** Unknown-outcome transactions (ack lost in the crash) that were stored nevertheless. */
  readonly inboundUnknownStored: number
  readonly inboundRows: number
  readonly outboundCalls: number
  readonly outboundCallsAnswered: number
  readonly outboundCallsBroken: number
  /** Calls answered 5xx other than 502 (counted among the broken ones). */
  readonly outboundCallsInternalError: number
  readonly outboundMessages: number
  readonly outboundQueued: number
  readonly recipientsCharged: number
  readonly recipientsSent: number
  readonly recipientsRefunded: number
  /** Charged recipients the relay took more than once (at-least-once after a crash mid-dispatch). */
  readonly relayDuplicates: number
  /** Messages the relay took whose dispatch was then given up and refunded (DISPATCH_ABANDONED). */
  readonly refundedButRelayed: number
  readonly topupsCreated: number
  readonly topupsCompleted: number
  readonly topupsFailed: number
  readonly paymentEventsPosted: number
  readonly paymentEventsAcknowledged: number
  readonly deliveries: number
  readonly deliveriesDelivered: number
  readonly deliveriesFailed: number
  readonly deliveriesInFlight: number
  readonly webhookRequests: number
  /** Deliveries the receiver answered 2xx more than once (a crash between answer and record). */
  readonly deliveriesDuplicated: number
}

export interface CheckResult {
  readonly violations: ReadonlyArray<string>
  readonly counts: CheckCounts
}

const n = (v: unknown) => Number(v)
const bare = (mid: string | null) => (mid ?? "").trim().replace(/^<|>$/g, "").toLowerCase()

/** At most this many violations of one kind are spelled out; the rest are counted. */
const LIMIT = 15

class Violations {
  readonly list: Array<string> = []
  private readonly perKind = new Map<string, number>()
  add(kind: string, text: string) {
    const seen = (this.perKind.get(kind) ?? 0) + 1
    this.perKind.set(kind, seen)
    if (seen <= LIMIT) this.list.push(`[${kind}] ${text}`)
    else if (seen === LIMIT + 1) this.list.push(`[${kind}] … more of this kind follow (not listed)`)
  }
}

const group = <A, K>(rows: ReadonlyArray<A>, key: (a: A) => K): Map<K, Array<A>> => {
  const out = new Map<K, Array<A>>()
  for (const r of rows) {
    const k = key(r)
    const list = out.get(k)
    if (list) list.push(r)
    else out.set(k, [r])
  }
  return out
}

export const checkInvariants = async (input: CheckInput): Promise<CheckResult> => {
  const { sql, records, relay, receiver, gateway } = input
  const v = new Violations()

  // ---- Money: balance = ledger sum >= 0, for every account --------------------------------
  const wallets = await sql.unsafe(`
    SELECT u.id, COALESCE(w.balance_tzs, 0) AS balance, COALESCE(l.total, 0) AS ledger, COALESCE(l.entries, 0) AS entries
      FROM users u
      LEFT JOIN wallets w ON w.user_id = u.id
      LEFT JOIN (SELECT user_id, sum(amount_tzs) AS total, count(*) AS entries FROM ledger_entries GROUP BY user_id) l ON l.user_id = u.id`)
  for (const w of wallets) {
    if (n(w.balance) !== n(w.ledger)) v.add("balance", `account ${w.id}: balance ${w.balance} TZS but its ${w.entries} ledger entries sum to ${w.ledger}`)
    if (n(w.balance) < 0) v.add("balance", `account ${w.id}: balance ${w.balance} TZS is negative`)
  }
  const ledger = await sql.unsafe(`SELECT id, user_id, kind, amount_tzs, reference_type, reference_id FROM ledger_entries`)
  const ledgerByRef = group(ledger, (e) => `${e.reference_type}:${e.reference_id}`)
  const entriesOf = (type: string, id: number | string) => ledgerByRef.get(`${type}:${id}`) ?? []

  // ---- Inbound: every 250 stored exactly once per address, charged once ----------------------
  const messages = await sql.unsafe(`SELECT id, address_id, user_id, message_id FROM inbound_messages`)
  const rowsByToken = group(messages, (m) => bare(m.message_id))
  const tokensSent = new Set(records.inbound.map((a) => a.token))
  let unknownStored = 0
  for (const a of records.inbound) {
    const rows = rowsByToken.get(a.token) ?? []
    const stored = new Set(rows.map((r) => n(r.address_id)))
    const perAddress = group(rows, (r) => n(r.address_id))
    for (const [address, copies] of perAddress) {
      if (copies.length > 1) v.add("inbound-duplicate", `${a.token}: stored ${copies.length} times for address ${address} (ids ${copies.map((c) => c.id).join(",")})`)
    }
    if (a.acceptedUnknown) v.add("inbound-unknown-accepted", `${a.token}: the MX accepted a recipient that is no address (${a.recipients.join(", ")})`)
    const expected = [...a.acceptedAddressIds].sort((x, y) => x - y)
    const got = [...stored].sort((x, y) => x - y)
    const sameSet = expected.length === got.length && expected.every((x, i) => x === got[i])
    switch (a.outcome) {
      case "acked":
        if (!sameSet) v.add("inbound-lost", `${a.token}: acknowledged 250 ("${a.dataReply}") for addresses [${expected}] but stored for [${got}]`)
        if (a.ackIds) {
          const ids = rows.map((r) => n(r.id)).sort((x, y) => x - y)
          const named = [...a.ackIds].sort((x, y) => x - y)
          if (ids.length !== named.length || !ids.every((x, i) => x === named[i])) {
            v.add("inbound-ack-ids", `${a.token}: the 250 named ids [${named}] but the rows are [${ids}]`)
          }
        }
        break
      case "refused":
      case "rejected":
        if (rows.length > 0) v.add("inbound-refused-stored", `${a.token}: answered "${a.dataReply || "no recipient accepted"}" but stored as ${rows.map((r) => r.id)}`)
        break
      case "unknown":
      case "pending":
        // The ack was lost in the crash: all of it or none of it (one transaction per message).
        if (rows.length > 0) {
          unknownStored++
          if (!sameSet) v.add("inbound-partial", `${a.token}: connection cut before the reply; stored for [${got}] of accepted [${expected}]`)
        }
        break
    }
  }
  for (const [token, rows] of rowsByToken) {
    if (!tokensSent.has(token)) v.add("inbound-unknown-row", `rows ${rows.map((r) => r.id)} carry Message-ID "${token}" that no client sent`)
  }
  for (const m of messages) {
    const entries = entriesOf("inbound_message", m.id)
    const debits = entries.filter((e) => e.kind === "debit")
    if (debits.length !== 1 || n(debits[0]!.amount_tzs) !== -PRICE || entries.length !== 1 || n(debits[0]!.user_id) !== n(m.user_id)) {
      v.add("inbound-charge", `message ${m.id}: expected one debit of ${PRICE} TZS, ledger has ${JSON.stringify(entries.map((e) => [e.kind, n(e.amount_tzs)]))}`)
    }
  }
  const messageIds = new Set(messages.map((m) => String(m.id)))
  for (const e of ledger) {
    if (e.reference_type === "inbound_message" && !messageIds.has(String(e.reference_id))) {
      v.add("inbound-charge", `ledger entry ${e.id} charges inbound message ${e.reference_id}, which does not exist`)
    }
  }
  const counters = await sql.unsafe(`
    SELECT a.id, a.message_count, a.unread_count, count(m.id) AS actual, count(m.id) FILTER (WHERE NOT m.is_read) AS unread
      FROM inbound_addresses a LEFT JOIN inbound_messages m ON m.address_id = a.id GROUP BY a.id`)
  for (const c of counters) {
    if (n(c.message_count) !== n(c.actual) || n(c.unread_count) !== n(c.unread)) {
      v.add("inbound-counters", `address ${c.id}: counters say ${c.message_count} messages / ${c.unread_count} unread, the table has ${c.actual} / ${c.unread}`)
    }
  }

  // ---- Payments: every completed top-up credited exactly once ------------------------------
  const topups = await sql.unsafe(`SELECT id, user_id, amount_tzs, status, provider_reference FROM topups`)
  const topupById = new Map(topups.map((t) => [n(t.id), t]))
  const events = await sql.unsafe(`SELECT event_id, event, outcome, topup_id FROM payment_events`)
  const acceptedByEvent = group(events.filter((e) => e.outcome === "applied" || e.outcome === "ignored"), (e) => e.event_id)
  for (const [id, rows] of acceptedByEvent) {
    if (rows.length > 1) v.add("payment-event-twice", `event ${id} accepted ${rows.length} times`)
  }
  const appliedByTopup = group(events.filter((e) => e.outcome === "applied"), (e) => n(e.topup_id))
  for (const t of topups) {
    const credits = entriesOf("topup", t.id).filter((e) => e.kind === "credit")
    const expected = t.status === "completed" ? 1 : 0
    if (credits.length !== expected) v.add("payment-credit", `top-up ${t.id} is ${t.status} and has ${credits.length} credits`)
    for (const c of credits) {
      if (n(c.amount_tzs) !== n(t.amount_tzs) || n(c.user_id) !== n(t.user_id)) {
        v.add("payment-credit", `top-up ${t.id} of ${t.amount_tzs} TZS (account ${t.user_id}) credited ${c.amount_tzs} to account ${c.user_id}`)
      }
    }
    const applied = appliedByTopup.get(n(t.id)) ?? []
    if (applied.length > 1) v.add("payment-event-twice", `top-up ${t.id} moved by ${applied.length} events`)
    if (t.status === "completed" && (applied.length !== 1 || applied[0]!.event !== "payment.completed")) {
      v.add("payment-credit", `top-up ${t.id} is completed without exactly one applied payment.completed event`)
    }
  }
  for (const d of gateway.deliveries) {
    if (d.status !== 0 && d.status !== 200) v.add("payment-refused", `event ${d.event.id} (${d.event.event}) was answered ${d.status} ${d.outcome}`)
  }
  for (const r of records.topups) {
    const t = topupById.get(r.topupId)
    if (!t) {
      v.add("payment-lost", `top-up ${r.topupId} was answered 201 to the client but is not in the table`)
      continue
    }
    if (t.provider_reference !== r.providerReference) v.add("payment-lost", `top-up ${r.topupId}: provider_reference ${t.provider_reference}, the client was given ${r.providerReference}`)
    const acked = r.primary.status === 200
    const want = r.intended === "payment.completed" ? "completed" : "failed"
    if (acked && t.status !== want) v.add("payment-state", `top-up ${r.topupId}: ${r.intended} acknowledged (${r.primary.outcome}) but the top-up is ${t.status}`)
    if (!acked && t.status !== "pending" && t.status !== want) v.add("payment-state", `top-up ${r.topupId}: only ${r.intended} was sent, yet it is ${t.status}`)
    // `duplicate` when the first post of it committed but its answer was lost in a kill.
    if (r.conflicting && r.conflicting.status !== 0 && (r.conflicting.status !== 200 || !["ignored", "duplicate"].includes(r.conflicting.outcome ?? ""))) {
      v.add("payment-state", `top-up ${r.topupId}: a contradicting ${r.conflicting.event.event} was answered ${r.conflicting.status} ${r.conflicting.outcome}, expected 200 ignored`)
    }
    if (input.final && (!acked || (r.conflicting && r.conflicting.status === 0))) {
      v.add("payment-stuck", `top-up ${r.topupId}: an event was never answered after the drain`)
    }
  }

  // ---- Webhooks: one delivery per webhook per stored message; none lost, none stuck --------
  const hooks = await sql.unsafe(`SELECT id, address_id, is_active FROM webhooks`)
  const hooksByAddress = group(hooks, (h) => n(h.address_id))
  // Inbox webhooks only (an account-level event endpoint, if the table ever carries those, is not ours).
  const deliveries = await sql.unsafe(
    `SELECT id, webhook_id, message_id, event, status, attempt, status_code, last_error FROM webhook_deliveries WHERE webhook_id IS NOT NULL`,
  )
  const deliveriesByMessage = group(deliveries.filter((d) => d.event === "inbound.message_received"), (d) => n(d.message_id))
  const messageById = new Map(messages.map((m) => [n(m.id), m]))
  for (const h of hooks) if (!h.is_active) v.add("webhook-inactive", `webhook ${h.id} was deactivated; the receiver never answers 410`)
  for (const m of messages) {
    const want = (hooksByAddress.get(n(m.address_id)) ?? []).map((h) => n(h.id)).sort((x, y) => x - y)
    const got = (deliveriesByMessage.get(n(m.id)) ?? []).map((d) => n(d.webhook_id)).sort((x, y) => x - y)
    if (want.length !== got.length || !want.every((x, i) => x === got[i])) {
      v.add("webhook-lost", `message ${m.id} at address ${m.address_id}: webhooks [${want}] but deliveries for [${got}]`)
    }
  }
  const requestsByDelivery = group(receiver.requests, (r) => r.deliveryId)
  const deliveryIds = new Set(deliveries.map((d) => String(d.id)))
  for (const [id, reqs] of requestsByDelivery) {
    if (!deliveryIds.has(id)) v.add("webhook-phantom", `the receiver got ${reqs.length} requests for delivery "${id}", which does not exist`)
  }
  let duplicated = 0
  let delivered = 0
  let failed = 0
  let inFlight = 0
  for (const d of deliveries) {
    const reqs = requestsByDelivery.get(String(d.id)) ?? []
    const ok = reqs.filter((r) => r.answered >= 200 && r.answered < 300)
    if (ok.length > 1) duplicated++
    if (reqs.length > n(d.attempt)) {
      v.add("webhook-attempts", `delivery ${d.id}: the receiver got ${reqs.length} requests but only ${d.attempt} attempts were taken`)
    }
    const message = messageById.get(n(d.message_id))
    for (const r of reqs) {
      if (!r.signatureValid) v.add("webhook-signature", `delivery ${d.id}: a request with a bad X-Signature`)
      if (n(r.payload.message_id) !== n(d.message_id) || n(r.payload.webhook_id) !== n(d.webhook_id) || n(r.payload.address_id) !== n(message?.address_id)) {
        v.add("webhook-payload", `delivery ${d.id}: payload ${r.body.slice(0, 200)} does not match the row (message ${d.message_id}, webhook ${d.webhook_id})`)
      }
    }
    switch (d.status) {
      case "delivered":
        delivered++
        if (ok.length === 0) v.add("webhook-false-delivered", `delivery ${d.id} is recorded delivered but the receiver never answered it 2xx`)
        if (!(n(d.status_code) >= 200 && n(d.status_code) < 300)) v.add("webhook-false-delivered", `delivery ${d.id} is delivered with status_code ${d.status_code}`)
        break
      case "failed":
        failed++
        if (n(d.attempt) < input.webhookMaxAttempts) {
          v.add("webhook-gave-up-early", `delivery ${d.id} failed after ${d.attempt} of ${input.webhookMaxAttempts} attempts (${d.last_error})`)
        }
        break
      default:
        inFlight++
        if (n(d.attempt) > input.webhookMaxAttempts) v.add("webhook-attempts", `delivery ${d.id} is ${d.status} at attempt ${d.attempt}`)
        if (input.final) v.add("webhook-stuck", `delivery ${d.id} is still ${d.status} (attempt ${d.attempt}) after the drain`)
    }
  }

  // ---- Outbound: every charged recipient sent or refunded; no send lost --------------------
  const contents = await sql.unsafe(`SELECT id, user_id, kind, subject FROM outbound_contents`)
  const outMessages = await sql.unsafe(
    `SELECT id, content_id, user_id, status, amount_tzs, message_id_header, attempts, error_code FROM outbound_messages`,
  )
  const recipients = await sql.unsafe(`SELECT message_id, email, status, charged, error FROM outbound_recipients`)
  const recipientsByMessage = group(recipients, (r) => n(r.message_id))
  const messagesByContent = group(outMessages, (m) => n(m.content_id))
  const relayed = relay.copies()
  let charged = 0
  let sent = 0
  let refunded = 0
  let relayDuplicates = 0
  let refundedButRelayed = 0
  let queued = 0
  for (const m of outMessages) {
    const rs = recipientsByMessage.get(n(m.id)) ?? []
    const mine = rs.filter((r) => r.charged)
    const sentR = mine.filter((r) => r.status === "sent")
    const failedR = mine.filter((r) => r.status === "failed")
    const queuedR = mine.filter((r) => r.status === "queued")
    charged += mine.length
    sent += sentR.length
    refunded += failedR.length
    const where = `outbound message ${m.id} (${m.status}, attempts ${m.attempts}${m.error_code ? `, ${m.error_code}` : ""})`
    if (n(m.amount_tzs) !== PRICE * (mine.length - failedR.length)) {
      v.add("outbound-amount", `${where}: amount_tzs ${m.amount_tzs} for ${mine.length} charged recipients of which ${failedR.length} failed`)
    }
    if (m.status === "queued") {
      queued++
      if (queuedR.length !== mine.length) v.add("outbound-state", `${where}: queued with recipients already settled`)
      if (input.final) v.add("outbound-stuck", `${where}: still queued after the drain`)
    } else if (queuedR.length > 0) {
      v.add("outbound-state", `${where}: ${queuedR.length} charged recipients still queued`)
    }
    if (m.status === "sent" && sentR.length === 0) v.add("outbound-state", `${where}: sent but no recipient was`)
    if (m.status === "failed" && sentR.length > 0) v.add("outbound-state", `${where}: failed but ${sentR.length} recipients were sent`)
    const refunds = entriesOf("outbound_message", m.id).filter((e) => e.kind === "refund")
    const refundSum = refunds.reduce((s, e) => s + n(e.amount_tzs), 0)
    if (refundSum !== PRICE * failedR.length) {
      v.add("outbound-refund", `${where}: ${failedR.length} charged recipients failed but refunds sum to ${refundSum} TZS`)
    }
    const copies = relayed.get(bare(m.message_id_header))
    for (const r of sentR) {
      const c = copies?.get(String(r.email).toLowerCase()) ?? 0
      if (c === 0) v.add("outbound-lost", `${where}: ${r.email} is recorded sent but the relay never took it`)
      if (c > 1) relayDuplicates++
    }
    if (m.status === "failed" && m.error_code === "DISPATCH_ABANDONED" && copies) refundedButRelayed++
  }
  for (const c of contents) {
    const ms = messagesByContent.get(n(c.id)) ?? []
    if (ms.length === 0) v.add("outbound-state", `outbound content ${c.id} has no messages`)
    const chargedRecipients = ms.reduce((s, m) => s + (recipientsByMessage.get(n(m.id)) ?? []).filter((r) => r.charged).length, 0)
    const debits = c.kind === "batch"
      ? entriesOf("outbound_batch", c.id).filter((e) => e.kind === "debit")
      : ms.flatMap((m) => entriesOf("outbound_message", m.id).filter((e) => e.kind === "debit"))
    const debitSum = debits.reduce((s, e) => s + n(e.amount_tzs), 0)
    if (debitSum !== -PRICE * chargedRecipients) {
      v.add("outbound-charge", `outbound content ${c.id} (${c.kind}): ${chargedRecipients} charged recipients, debits sum to ${debitSum} TZS`)
    }
  }
  const contentByToken = new Map<string, (typeof contents)[number]>()
  for (const c of contents) {
    const token = /crash outbound (\S+)/.exec(String(c.subject))?.[1]
    if (token) {
      if (contentByToken.has(token)) v.add("outbound-duplicate", `send ${token} was written twice (contents ${contentByToken.get(token)!.id}, ${c.id})`)
      contentByToken.set(token, c)
    }
  }
  let answered = 0
  let broken = 0
  let internalErrors = 0
  for (const a of records.outbound) {
    const c = contentByToken.get(a.token)
    const ms = c ? messagesByContent.get(n(c.id)) ?? [] : []
    if (a.status === 0 || (a.status >= 500 && a.status !== 502)) {
      // Cut by a kill, or an internal error: the outcome is unknown to the client (as after a
      // timeout); whatever was written must still add up (checked above), nothing more.
      if (a.status !== 0) internalErrors++
      broken++
      continue
    }
    answered++
    if (a.status === 201) {
      if (!c) {
        v.add("outbound-lost", `send ${a.token} was answered 201 but nothing is stored`)
        continue
      }
      const told: Array<{ id: number; status: string }> = a.kind === "batch" ? a.data?.messages ?? [] : [a.data]
      for (const t of told) {
        const m = ms.find((x) => n(x.id) === n(t.id))
        if (!m) v.add("outbound-lost", `send ${a.token}: the answer names message ${t.id}, which is not stored with it`)
        else if (m.status !== t.status) v.add("outbound-state", `send ${a.token}: message ${t.id} was answered ${t.status} but is ${m.status}`)
      }
    } else if (a.status === 502) {
      if (!c) v.add("outbound-lost", `send ${a.token} answered 502 but no message was recorded`)
      for (const m of ms) {
        if (m.status !== "failed" || n(m.amount_tzs) !== 0) v.add("outbound-refund", `send ${a.token} answered 502 but message ${m.id} is ${m.status} with ${m.amount_tzs} TZS kept`)
      }
    } else if (c) {
      v.add("outbound-state", `send ${a.token} answered ${a.status} yet content ${c.id} was written`)
    }
  }

  const inbound = records.inbound
  return {
    violations: v.list,
    counts: {
      accounts: input.accounts.length,
      inboundAcked: inbound.filter((a) => a.outcome === "acked").length,
      inboundAckedWithoutIds: inbound.filter((a) => a.outcome === "acked" && a.ackIds === null).length,
      inboundRefusedOrRejected: inbound.filter((a) => a.outcome === "refused" || a.outcome === "rejected").length,
      inboundUnknown: inbound.filter((a) => a.outcome === "unknown" || a.outcome === "pending").length,
      inboundUnknownStored: unknownStored,
      inboundRows: messages.length,
      outboundCalls: records.outbound.length,
      outboundCallsAnswered: answered,
      outboundCallsBroken: broken,
      outboundCallsInternalError: internalErrors,
      outboundMessages: outMessages.length,
      outboundQueued: queued,
      recipientsCharged: charged,
      recipientsSent: sent,
      recipientsRefunded: refunded,
      relayDuplicates,
      refundedButRelayed,
      topupsCreated: records.topups.length,
      topupsCompleted: topups.filter((t) => t.status === "completed").length,
      topupsFailed: topups.filter((t) => t.status === "failed").length,
      paymentEventsPosted: gateway.deliveries.length,
      paymentEventsAcknowledged: gateway.deliveries.filter((d) => d.status === 200).length,
      deliveries: deliveries.length,
      deliveriesDelivered: delivered,
      deliveriesFailed: failed,
      deliveriesInFlight: inFlight,
      webhookRequests: receiver.requests.length,
      deliveriesDuplicated: duplicated,
    },
  }
}
