/**
 * Outbound transactional email (SPEC.md "Outbound email", DECISIONS.md "Outbound", "Billing").
 *
 * A send is checked in full first (verified identity, recipients, attachments, template, From),
 * then rate limited, then suppressed recipients are dropped. One transaction then records the
 * content, the message and a row per recipient (the outbox) and charges 5 TZS per remaining
 * recipient: 402 writes nothing. Only after that commit is the provider called, and its answer
 * recorded with any refund (dispatch.ts). A crash in between leaves the message `queued`
 * under a lease, and the recovery worker dispatches it.
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { Authenticator } from "../auth/service.ts"
import { Billing, PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import {
  type Conflict,
  type FieldIssue,
  type Forbidden,
  type InsufficientBalance,
  NotFound,
  ProviderError,
  type RateLimited,
  Suppressed,
  ValidationError,
} from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import type { MailAttachment } from "../ports/OutboundMailer.ts"
import { RateLimiter, type RateLimitStatus } from "../ratelimit/service.ts"
import { type SenderIdentity, SenderIdentities } from "../sending-domains/identity.ts"
import { randomHex } from "../shared/crypto.ts"
import { owned } from "../shared/ownership.ts"
import { Templates } from "../templates/service.ts"
import { decodeAttachments } from "./attachments.ts"
import { type Content, headerIssues, mergeContent, type OutboundRequest, type ParsedRecipient, parseRecipients } from "./compose.ts"
import { buildDispatch, DISPATCH_LEASE, OutboundDispatcher } from "./dispatch.ts"
import { returnPathKey } from "../bounces/verp.ts"
import { AppConfig } from "../config.ts"
import { claimKey, type IdempotencyKey, withIdempotencyKey } from "./idempotency.ts"
import { BATCH_CHUNK, MAX_BATCH_RECIPIENTS, MAX_RECIPIENTS, OutboundRateLimit, rateLimitKey } from "./limits.ts"
import { normalizedEmail } from "./recipients.ts"
import {
  type BatchEmailBody,
  type BatchResult,
  type OutboundMessage,
  type OutboundMessageDetail,
  type OutboundMessageRow,
  MESSAGE_SELECT,
  PAGE_SELECT,
  type Suppression,
  type SuppressionRow,
  toBatchResult,
  toOutboundMessage,
  toOutboundRecipient,
  toSuppression,
} from "./schema.ts"
import { contentOf, insertContent, insertMessages, messagesByIds, messagesOfContent, type RecipientKind, recipientsOf } from "./store.ts"
import { byId, type HeavyPage, heavyPage } from "../shared/heavy-pages.ts"
import type { Page } from "../shared/pages.ts"

/** What a send answers: the result, the caller's rate-limit bucket, and whether it was a replay. */
export interface Sent<A> {
  readonly data: A
  /** The bucket after this call; null for an Idempotency-Key replay, which takes nothing. */
  readonly rateLimit: RateLimitStatus | null
  readonly replayed: boolean
}

export type SendError =
  | ValidationError
  | Suppressed
  | InsufficientBalance
  | Forbidden
  | NotFound
  | RateLimited
  | ProviderError
  | DbError

export interface OutboundShape {
  /** POST /api/outbound/emails (and OutboundSender): one message to to + cc + bcc. */
  readonly send: (
    userId: number,
    request: OutboundRequest,
    key?: Option.Option<IdempotencyKey>,
  ) => Effect.Effect<Sent<OutboundMessage>, SendError | Conflict>
  /** POST /api/outbound/emails/batch: one message per recipient, charged up front. */
  readonly sendBatch: (
    userId: number,
    request: BatchEmailBody,
    key?: Option.Option<IdempotencyKey>,
  ) => Effect.Effect<Sent<BatchResult>, Exclude<SendError, ProviderError> | Conflict>
  /**
   * The account's messages, newest first: a page's messages at hand in `rows`, those with large
   * bodies in `more` (../shared/heavy-pages.ts).
   */
  readonly list: (
    userId: number,
    page: Page,
  ) => Effect.Effect<
    { readonly rows: ReadonlyArray<OutboundMessage>; readonly more: HeavyPage<OutboundMessage, DbError, never>["more"]; readonly total: number },
    DbError
  >
  readonly get: (userId: number, id: number) => Effect.Effect<OutboundMessageDetail, NotFound | Forbidden | DbError>
  /** The MIME the capture transport kept for a message (SMTP_RELAY_URL unset); 404 when it went to a relay. */
  readonly captured: (userId: number, id: number) => Effect.Effect<Uint8Array, NotFound | Forbidden | DbError>
  readonly suppressions: (userId: number, page: Page) => Effect.Effect<{ readonly rows: ReadonlyArray<Suppression>; readonly total: number }, DbError>
  /** Takes an address off the suppression list (after the recipient fixed their mailbox). */
  readonly unsuppress: (userId: number, email: string) => Effect.Effect<void, NotFound | DbError>
}

interface Prepared {
  readonly recipients: ReadonlyArray<ParsedRecipient>
  readonly attachments: ReadonlyArray<MailAttachment>
  readonly content: Content
  readonly identity: SenderIdentity
}

const issue = (field: string, message: string): FieldIssue => ({ field, code: "VALIDATION_ERROR", message })
const invalid = (issues: ReadonlyArray<FieldIssue>) => new ValidationError({ message: "request validation failed", issues })

const leaseMillis = Duration.toMillis(DISPATCH_LEASE)

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))

export class Outbound extends Context.Service<Outbound, OutboundShape>()("app/Outbound") {
  static readonly layer = Layer.effect(
    Outbound,
    Effect.gen(function*() {
      const db = yield* Database
      const auth = yield* Authenticator
      const billing = yield* Billing
      const limiter = yield* RateLimiter
      const senders = yield* SenderIdentities
      const templates = yield* Templates
      const dispatcher = yield* OutboundDispatcher
      const config = yield* AppConfig
      const verpKey = returnPathKey(config)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      /** Everything about the request that can be refused before money or rate is spent. */
      const prepare = (userId: number, request: OutboundRequest, mode: "single" | "batch", extra: ReadonlyArray<FieldIssue>) =>
        Effect.gen(function*() {
          yield* auth.requireVerifiedIdentity(userId, "outbound")
          const lists: ReadonlyArray<readonly [RecipientKind, ReadonlyArray<string>]> = mode === "single"
            ? [["to", request.to ?? []], ["cc", request.cc ?? []], ["bcc", request.bcc ?? []]]
            : [["to", request.to ?? []]]
          const given = lists.reduce((n, [, list]) => n + list.length, 0)
          const parsed = parseRecipients(lists)
          const attachments = decodeAttachments(request.attachments ?? [])
          const max = mode === "single" ? MAX_RECIPIENTS : MAX_BATCH_RECIPIENTS
          const issues = [...extra, ...parsed.issues, ...attachments.issues, ...headerIssues(request.headers ?? {})]
          if (given === 0) issues.push(issue("to", mode === "single" ? "at least one recipient is required (to, cc or bcc)" : "at least one recipient is required"))
          if (given > max) {
            issues.push(issue("to", mode === "single"
              ? `at most ${MAX_RECIPIENTS} recipients per call, to + cc + bcc together (got ${given}); use /emails/batch for more`
              : `at most ${MAX_BATCH_RECIPIENTS} recipients per batch call (got ${given})`))
          }
          if (issues.length > 0) return yield* invalid(issues)
          const template = request.template_id == null ? undefined : yield* templates.forSend(userId, request.template_id)
          const merged = mergeContent(request, template, config.maxBodyBytes)
          if (merged.issues.length > 0) return yield* invalid(merged.issues)
          const identity = yield* senders.senderIdentity(userId, {
            from_domain_id: request.from_domain_id ?? undefined,
            from_address: request.from_address ?? undefined,
          })
          return { recipients: parsed.recipients, attachments: attachments.attachments, content: merged.content, identity } satisfies Prepared
        })

      /** The lowercase addresses among `emails` on the account's suppression list. */
      const suppressedAmong = (userId: number, emails: ReadonlyArray<string>) =>
        Effect.map(
          db.query<{ email: string }>(
            "SELECT email FROM suppressions WHERE user_id = $1 AND email IN (SELECT jsonb_array_elements_text($2::jsonb))",
            [userId, JSON.stringify(emails.map(normalizedEmail))],
          ),
          (rows) => new Set(rows.map((r) => r.email)),
        )

      const messageIdHeader = (from: string) => Effect.map(randomHex(12), (hex) => `${hex}@${from.slice(from.lastIndexOf("@") + 1)}`)

      const contentFields = (userId: number, kind: "single" | "batch", p: Prepared, suppressed: ReadonlyArray<string>) => ({
        userId,
        kind,
        subject: p.content.subject,
        html: p.content.html,
        text: p.content.text,
        headers: p.content.headers,
        templateId: p.content.templateId,
        suppressed,
        attachments: p.attachments,
      })

      const storedContent = (p: Prepared) => ({
        subject: p.content.subject,
        html_body: p.content.html,
        text_body: p.content.text,
        headers: p.content.headers,
      })

      const idempotent = <A, E>(
        userId: number,
        key: Option.Option<IdempotencyKey>,
        replay: (contentId: number) => Effect.Effect<A, DbError>,
        send: Effect.Effect<Sent<A>, E | DbError>,
      ) =>
        withIdempotencyKey(db, userId, key, (contentId) => Effect.map(replay(contentId), (data): Sent<A> => ({ data, rateLimit: null, replayed: true })), send)

      const replaySingle = (contentId: number) => Effect.map(messagesOfContent(db, contentId), (rows) => toOutboundMessage(rows[0]!))

      const replayBatch = (contentId: number) =>
        Effect.gen(function*() {
          const content = yield* contentOf(db, contentId)
          return toBatchResult(yield* messagesOfContent(db, contentId), content?.suppressed ?? [])
        })

      const send = Effect.fn("Outbound.send")(function*(userId: number, request: OutboundRequest, key: Option.Option<IdempotencyKey> = Option.none()) {
        return yield* idempotent(userId, key, replaySingle, Effect.gen(function*() {
          const prepared = yield* prepare(userId, request, "single", [])
          const rateLimit = yield* limiter.take(rateLimitKey(userId), yield* OutboundRateLimit)
          const suppressed = yield* suppressedAmong(userId, prepared.recipients.map((r) => r.email))
          const recipients = prepared.recipients.map((r) => ({ ...r, charged: !suppressed.has(normalizedEmail(r.email)) }))
          const live = recipients.filter((r) => r.charged).length
          if (live === 0) return yield* new Suppressed({ message: "every recipient is on this account's suppression list" })
          const cost = live * PRICE_PER_MESSAGE_TZS
          const at = yield* now
          const mid = yield* messageIdHeader(prepared.identity.from)
          const messageId = yield* db.transaction(Effect.gen(function*() {
            const contentId = yield* insertContent(db, contentFields(userId, "single", prepared, []), at)
            const [id] = yield* insertMessages(db, {
              userId,
              contentId,
              from: prepared.identity.from,
              domainId: prepared.identity.domainId,
              price: PRICE_PER_MESSAGE_TZS,
              lease: new Date(at.getTime() + leaseMillis),
              at,
            }, [{ messageIdHeader: mid, recipients }])
            yield* billing.charge({
              userId,
              amount: cost,
              reference: { type: "outbound_message", id: id! },
              description: `outbound message to ${live} recipient(s)`,
            }).pipe(Effect.catchTag("ValidationError", Effect.die))
            if (Option.isSome(key)) yield* claimKey(db, userId, key.value, contentId, at)
            return id!
          }))
          const [row] = yield* messagesByIds(db, [messageId])
          const delivered = yield* dispatcher.deliver(
            row!,
            buildDispatch(row!, storedContent(prepared), recipients, prepared.attachments, prepared.identity.dkim, verpKey),
          )
          if (Option.isSome(delivered.failure)) {
            return yield* new ProviderError({
              message: `the mail provider did not accept the message; outbound message ${messageId} failed and its ${cost} TZS were refunded`,
              detail: delivered.failure.value.detail ?? delivered.failure.value.message,
            })
          }
          return { data: toOutboundMessage(delivered.message), rateLimit, replayed: false } satisfies Sent<OutboundMessage>
        }))
      })

      const sendBatch = Effect.fn("Outbound.sendBatch")(function*(
        userId: number,
        request: BatchEmailBody,
        key: Option.Option<IdempotencyKey> = Option.none(),
      ) {
        return yield* idempotent(userId, key, replayBatch, Effect.gen(function*() {
          const noCopies = (["cc", "bcc"] as const).filter((f) => request[f] != null).map((f) =>
            issue(f, `a batch has no ${f}: every recipient gets a message of their own`)
          )
          const prepared = yield* prepare(userId, { ...request, cc: undefined, bcc: undefined }, "batch", noCopies)
          const rateLimit = yield* limiter.take(rateLimitKey(userId), yield* OutboundRateLimit)
          const suppressed = yield* suppressedAmong(userId, prepared.recipients.map((r) => r.email))
          const live = prepared.recipients.filter((r) => !suppressed.has(normalizedEmail(r.email)))
          const skipped = prepared.recipients.filter((r) => suppressed.has(normalizedEmail(r.email))).map((r) => r.email)
          if (live.length === 0) return yield* new Suppressed({ message: "every recipient is on this account's suppression list" })
          const at = yield* now
          const lease = new Date(at.getTime() + leaseMillis)
          const mids = yield* Effect.forEach(live, () => messageIdHeader(prepared.identity.from))
          const { contentId, ids } = yield* db.transaction(Effect.gen(function*() {
            const contentId = yield* insertContent(db, contentFields(userId, "batch", prepared, skipped), at)
            const ids = yield* insertMessages(
              db,
              { userId, contentId, from: prepared.identity.from, domainId: prepared.identity.domainId, price: PRICE_PER_MESSAGE_TZS, lease, at },
              live.map((r, i) => ({ messageIdHeader: mids[i]!, recipients: [{ ...r, kind: "to" as const, charged: true }] })),
            )
            // The whole batch is covered up front, or nothing is written (402).
            yield* billing.charge({
              userId,
              amount: live.length * PRICE_PER_MESSAGE_TZS,
              reference: { type: "outbound_batch", id: contentId },
              description: `outbound batch of ${live.length} message(s)`,
            }).pipe(Effect.catchTag("ValidationError", Effect.die))
            if (Option.isSome(key)) yield* claimKey(db, userId, key.value, contentId, at)
            return { contentId, ids }
          }))
          const recipientOf = new Map(ids.map((id, i) => [id, live[i]!]))
          for (const chunk of chunksOf(ids, BATCH_CHUNK)) {
            const held = yield* renewLease(chunk, lease)
            const rows = yield* messagesByIds(db, held)
            yield* Effect.forEach(
              rows,
              (row) =>
                dispatcher.deliver(
                  row,
                  buildDispatch(
                    row,
                    storedContent(prepared),
                    [{ ...recipientOf.get(row.id)!, kind: "to", charged: true }],
                    prepared.attachments,
                    prepared.identity.dkim,
                    verpKey,
                  ),
                ),
              { concurrency: 10, discard: true },
            )
          }
          return { data: toBatchResult(yield* messagesOfContent(db, contentId), skipped), rateLimit, replayed: false } satisfies Sent<BatchResult>
        }))
      })

      /**
       * Extends the lease of a batch chunk about to be dispatched; returns the ids still held
       * (a message whose first lease ran out may already be the recovery worker's).
       */
      const renewLease = (ids: ReadonlyArray<number>, held: Date) =>
        Effect.gen(function*() {
          const at = yield* now
          const rows = yield* db.query<{ id: number }>(
            `UPDATE outbound_messages SET locked_until = $3
              WHERE id IN (SELECT (jsonb_array_elements_text($1::jsonb))::bigint) AND status = 'queued' AND locked_until = $2
              RETURNING id`,
            [JSON.stringify(ids), held, new Date(at.getTime() + leaseMillis)],
          )
          const kept = new Set(rows.map((r) => r.id))
          return ids.filter((id) => kept.has(id))
        })

      const list = Effect.fn("Outbound.list")(function*(userId: number, page: Page) {
        const rows = yield* db.query<OutboundMessageRow & { body_bytes: number }>(
          `${PAGE_SELECT} WHERE m.user_id = $1 ORDER BY (-m.id) LIMIT $2 OFFSET $3`,
          [userId, page.limit, page.offset],
        )
        const [count] = yield* db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM outbound_messages WHERE user_id = $1", [userId])
        type Bodies = Pick<OutboundMessageRow, "text_body" | "html_body">
        const bodies = (ids: ReadonlyArray<number>) =>
          Effect.map(
            db.query<Bodies & { id: number }>(
              `SELECT m.id, c.text_body, c.html_body FROM outbound_messages m JOIN outbound_contents c ON c.id = m.content_id
                WHERE m.id = ANY($1::bigint[]) AND m.user_id = $2`,
              [ids.map(String), userId],
            ),
            byId,
          )
        const { data, more } = heavyPage(rows, bodies, (row, b: Bodies | undefined) => toOutboundMessage(b ? { ...row, ...b } : row))
        return { rows: data, more, total: count?.n ?? 0 }
      })

      const get = Effect.fn("Outbound.get")(function*(userId: number, id: number) {
        const row = yield* Effect.flatMap(db.query<OutboundMessageRow>(`${MESSAGE_SELECT} WHERE m.id = $1`, [id]), (rows) =>
          owned("outbound message", rows, userId))
        const recipients = yield* recipientsOf(db, id)
        return { ...toOutboundMessage(row), recipients: recipients.map(toOutboundRecipient) }
      })

      const captured = Effect.fn("Outbound.captured")(function*(userId: number, id: number) {
        yield* Effect.flatMap(db.query<{ user_id: number }>("SELECT user_id FROM outbound_messages WHERE id = $1", [id]), (rows) =>
          owned("outbound message", rows, userId))
        const [row] = yield* db.query<{ raw: string }>(
          "SELECT encode(raw, 'base64') AS raw FROM outbound_captures WHERE message_id = $1 ORDER BY id DESC LIMIT 1",
          [id],
        )
        if (!row) return yield* new NotFound({ message: "no capture of this message: it was handed to the SMTP relay" })
        return new Uint8Array(Buffer.from(row.raw, "base64"))
      })

      const suppressions = Effect.fn("Outbound.suppressions")(function*(userId: number, page: Page) {
        const rows = yield* db.query<SuppressionRow>(
          "SELECT * FROM suppressions WHERE user_id = $1 ORDER BY created_at DESC, email LIMIT $2 OFFSET $3",
          [userId, page.limit, page.offset],
        )
        const [count] = yield* db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM suppressions WHERE user_id = $1", [userId])
        return { rows: rows.map(toSuppression), total: count?.n ?? 0 }
      })

      const unsuppress = Effect.fn("Outbound.unsuppress")(function*(userId: number, email: string) {
        const rows = yield* db.query("DELETE FROM suppressions WHERE user_id = $1 AND email = $2 RETURNING email", [userId, normalizedEmail(email.trim())])
        if (rows.length === 0) return yield* new NotFound({ message: "this address is not on the suppression list" })
      })

      return Outbound.of({ send, sendBatch, list, get, captured, suppressions, unsuppress })
    }),
  )
}
