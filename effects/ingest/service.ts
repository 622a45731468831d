/**
 * Ingest: what the MX server asks at RCPT (may this recipient get mail now?) and at the end of
 * DATA (store it). A message is stored once per account and once per recipient address, and each
 * address copy is charged 5 TZS; the rows, the debits and the follow-up work (MessageEvents) go
 * in one transaction, so the sender's 250 means all of it committed and a refusal means none.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Billing, PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import { AppConfig } from "../config.ts"
import { InsufficientBalance } from "../errors.ts"
import { DomainSuspended, UnknownRecipient } from "../addresses/errors.ts"
import type { Route } from "../addresses/schema.ts"
import { InboundAddresses } from "../addresses/service.ts"
import { Database, type DbError } from "../ports/Database.ts"
import type { Dns } from "../ports/Dns.ts"
import { randomHex } from "../shared/crypto.ts"
import { type AuthResults, authenticateMessage, plainIp } from "./authenticate.ts"
import { MessageEvents, type StoredMessage } from "./events.ts"
import { type MalformedMessage, type ParsedMessage, parseMessage } from "./parse.ts"

export interface Delivery {
  readonly raw: Uint8Array
  /** MAIL FROM ('' for the null sender of bounces). */
  readonly mailFrom: string
  /** RCPT TO addresses as given, in order. */
  readonly recipients: ReadonlyArray<string>
  readonly client: { readonly ip: string; readonly helo: string }
}

export interface IngestShape {
  /**
   * RCPT-time check: the recipient routes to an address, its domain is not suspended, and the
   * wallet covers this copy on top of the ones already `accepted` in this transaction.
   */
  readonly admit: (
    recipient: string,
    accepted: ReadonlyArray<Route>,
  ) => Effect.Effect<Route, UnknownRecipient | DomainSuspended | InsufficientBalance | DbError>
  /** DATA-time: authenticate, parse, and store + charge every recipient address; returns the message ids. */
  readonly deliver: (delivery: Delivery) => Effect.Effect<
    ReadonlyArray<number>,
    UnknownRecipient | InsufficientBalance | MalformedMessage | DbError
  >
}

const DAY_MS = 86_400_000

/** A `Received:` trace line; client-supplied names are reduced to hostname characters. */
const receivedHeader = (d: Delivery, mta: string, id: string, at: Date): string => {
  const helo = d.client.helo.replace(/[^A-Za-z0-9.\-_:[\]]/g, "").slice(0, 255) || "unknown"
  const date = at.toUTCString().replace("GMT", "+0000")
  return `Received: from ${helo} ([${plainIp(d.client.ip)}])\r\n\tby ${mta} with ESMTP id ${id};\r\n\t${date}\r\n`
}

export class Ingest extends Context.Service<Ingest, IngestShape>()("app/Ingest") {
  static readonly layer = Layer.effect(
    Ingest,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const billing = yield* Billing
      const addresses = yield* InboundAddresses
      const events = yield* MessageEvents
      const context = yield* Effect.context<Dns>()

      const admit = Effect.fn("Ingest.admit")(function*(recipient: string, accepted: ReadonlyArray<Route>) {
        const route = yield* addresses.route(recipient)
        const copies = new Set(accepted.filter((r) => r.userId === route.userId).map((r) => r.addressId))
        copies.add(route.addressId)
        const required = copies.size * PRICE_PER_MESSAGE_TZS
        const balance = yield* billing.balance(route.userId)
        if (balance < required) {
          return yield* new InsufficientBalance({ message: "the account cannot pay for this message", required_tzs: required, balance_tzs: balance })
        }
        return route
      })

      /** Routes of the recipients that still reach an address, one per address. */
      const routesOf = (recipients: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const byAddress = new Map<number, Route & { readonly rcpt: string }>()
          for (const rcpt of recipients) {
            const routed = yield* Effect.result(addresses.route(rcpt))
            if (routed._tag === "Success") {
              if (!byAddress.has(routed.success.addressId)) byAddress.set(routed.success.addressId, { ...routed.success, rcpt })
            } else if (routed.failure._tag === "DbError") {
              return yield* routed.failure
            } else {
              // Accepted at RCPT, gone since (address deleted, domain suspended): not delivered.
              yield* Effect.logInfo("recipient no longer routes").pipe(Effect.annotateLogs({ rcpt, reason: routed.failure._tag }))
            }
          }
          return [...byAddress.values()]
        })

      const store = (d: Delivery, raw: Uint8Array, parsed: ParsedMessage, auth: AuthResults, at: Date) =>
        db.transaction(Effect.gen(function*() {
          const routes = yield* routesOf(d.recipients)
          if (routes.length === 0) return yield* new UnknownRecipient({ address: d.recipients[0] ?? "" })
          const attachmentMeta = parsed.attachments.map((a) => ({
            filename: a.filename,
            content_type: a.contentType,
            size: a.content.byteLength,
            content_id: a.contentId,
          }))
          const stored: Array<StoredMessage> = []
          for (const userId of new Set(routes.map((r) => r.userId))) {
            const mine = routes.filter((r) => r.userId === userId)
            const [mime] = yield* db.query<{ id: number }>(
              "INSERT INTO inbound_mime (user_id, raw, size_bytes, message_refs, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
              [userId, raw, raw.byteLength, mine.length, at],
            )
            for (const [position, a] of parsed.attachments.entries()) {
              yield* db.query(
                `INSERT INTO inbound_attachments (mime_id, position, filename, content_type, content_id, size, content)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)`,
                [mime!.id, position, a.filename, a.contentType, a.contentId, a.content.byteLength, a.content],
              )
            }
            for (const route of mine) {
              const [row] = yield* db.query<{ id: number }>(
                `INSERT INTO inbound_messages (address_id, user_id, mime_id, from_addr, to_addr, envelope_from, subject, text_body,
                                               html_body, headers, attachments, auth_results, message_id, size_bytes, received_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id`,
                [
                  route.addressId,
                  userId,
                  mime!.id,
                  parsed.from || d.mailFrom,
                  route.rcpt,
                  d.mailFrom,
                  parsed.subject,
                  parsed.text,
                  parsed.html,
                  JSON.stringify(parsed.headers),
                  JSON.stringify(attachmentMeta),
                  JSON.stringify(auth),
                  parsed.messageId,
                  raw.byteLength,
                  at,
                  new Date(at.getTime() + route.retentionDays * DAY_MS),
                ],
              )
              const message: StoredMessage = {
                id: row!.id,
                userId,
                addressId: route.addressId,
                fromAddr: parsed.from || d.mailFrom,
                toAddr: route.rcpt,
                subject: parsed.subject,
                textBody: parsed.text,
                headers: parsed.headers,
                receivedAt: at,
              }
              yield* events.stored(message)
              stored.push(message)
            }
          }
          // The shared rows (address counters, wallets) are locked last, so they are held only until
          // the commit that follows, and in one global order (addresses, then wallets, each by id),
          // so two deliveries to overlapping recipients cannot deadlock.
          for (const m of [...stored].sort((a, b) => a.addressId - b.addressId)) {
            yield* db.query(
              "UPDATE inbound_addresses SET message_count = message_count + 1, unread_count = unread_count + 1 WHERE id = $1",
              [m.addressId],
            )
          }
          for (const m of [...stored].sort((a, b) => a.userId - b.userId || a.id - b.id)) {
            yield* billing.charge({ userId: m.userId, amount: PRICE_PER_MESSAGE_TZS, reference: { type: "inbound_message", id: m.id } }).pipe(
              Effect.catchTag("ValidationError", (e) => Effect.die(e)),
            )
          }
          return stored
        }))

      const deliver = Effect.fn("Ingest.deliver")(function*(d: Delivery) {
        const at = new Date(yield* Clock.currentTimeMillis)
        const auth = yield* authenticateMessage(d.raw, { ip: d.client.ip, helo: d.client.helo, sender: d.mailFrom, mta: config.mxHost })
          .pipe(Effect.provideContext(context))
        const trace = Buffer.from(auth.headers + receivedHeader(d, config.mxHost, yield* randomHex(8), at), "utf8")
        const raw = Buffer.concat([trace, d.raw])
        const parsed = yield* parseMessage(raw)
        const stored = yield* store(d, raw, parsed, auth.results, at)
        yield* Effect.forEach(stored, (m) => events.committed(m), { discard: true })
        return stored.map((m) => m.id)
      })

      return Ingest.of({ admit, deliver })
    }),
  )
}
