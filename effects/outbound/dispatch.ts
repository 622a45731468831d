/**
 * Dispatch of queued outbound messages and the recording of what the provider answered. Used by
 * the send path right after the charging transaction and by the recovery worker for messages a
 * crash left queued (src/workers/outbound.ts).
 *
 * Money is exact because an outcome is recorded only by the statement that moves the message
 * out of `queued` (whoever records first wins), and the refund is in the same transaction: a
 * recipient the provider refused gives back its 5 TZS, a message the provider did not take at
 * all gives back everything. A permanent (5xx) refusal also puts the address on the account's
 * suppression list. The same transaction queues `email.sent` / `email.failed` for the account's
 * event endpoints (outbox), one per recipient.
 *
 * Every recipient goes in its own SMTP transaction whose MAIL FROM is its VERP return path
 * (effects/bounces/verp.ts): `buildDispatch` names them.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Schema, Semaphore } from "effect"
import { Billing, PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import { type ReturnPathKey, returnPath, returnPathKey } from "../bounces/verp.ts"
import { AppConfig } from "../config.ts"
import type { ProviderError } from "../errors.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { type DispatchResult, type MailAttachment, OutboundMailer, type OutboundDispatch } from "../ports/OutboundMailer.ts"
import type { DkimKey } from "../sending-domains/identity.ts"
import { SenderIdentities } from "../sending-domains/identity.ts"
import type { OutboundEvent } from "../webhooks/endpoint-schema.ts"
import { EventDeliveries } from "../webhooks/event-deliveries.ts"
import { dispatchEvent } from "./events.ts"
import { DISPATCH_BUDGET_BYTES } from "./limits.ts"
import { normalizedEmail } from "./recipients.ts"
import type { OutboundMessageRow, OutboundRecipientRow } from "./schema.ts"
import { attachmentsOf, type ContentRow, contentOf, messagesByIds, recipientsOf, releaseAttachments } from "./store.ts"

/** How long a dispatcher holds a queued message before the recovery worker may take it over. */
export const DISPATCH_LEASE = Duration.minutes(5)
/** Dispatches a message may start (its own and the worker's) before it is given up and refunded. */
export const MAX_DISPATCH_ATTEMPTS = 3

/** What a queued message holds of the customer's money (refunded in full if it is never sent); decoded. */
const QueuedRow = Schema.Struct({ user_id: Schema.Int, amount_tzs: Schema.Int, content_id: Schema.Int })

/** A reply code that refuses for good: 5xx, except 503 (a command out of sequence, not the address). */
export const isPermanent = (code: number | null): boolean => code !== null && code >= 500 && code < 600 && code !== 503

export type FailureCode = "PROVIDER_ERROR" | "SENDER_NOT_ALLOWED" | "DISPATCH_ABANDONED"

/** What one dispatch ended as: the message as now recorded, and the provider failure if there was one. */
export interface Delivered {
  readonly message: OutboundMessageRow
  readonly failure: Option.Option<ProviderError>
}

/**
 * The provider's view of a message: headers from all recipients, envelope from the charged ones,
 * each with the return path of its position among all the message's recipients.
 */
export const buildDispatch = (
  message: Pick<OutboundMessageRow, "id" | "user_id" | "from_address" | "message_id_header">,
  content: Pick<ContentRow, "subject" | "html_body" | "text_body" | "headers">,
  recipients: ReadonlyArray<
    Pick<OutboundRecipientRow, "email" | "kind" | "charged"> & { readonly name?: string | null | undefined }
  >,
  attachments: ReadonlyArray<MailAttachment>,
  dkim: Option.Option<DkimKey>,
  key: ReturnPathKey,
): OutboundDispatch => {
  const header = (kind: "to" | "cc") =>
    recipients.filter((r) => r.kind === kind).map((r) => (r.name ? { email: r.email, name: r.name } : { email: r.email }))
  const live = recipients.flatMap((r, index) => (r.charged ? [{ email: r.email, index }] : []))
  return {
    userId: message.user_id,
    messageId: message.id,
    from: message.from_address,
    to: header("to"),
    cc: header("cc"),
    envelope: live.map((r) => r.email),
    returnPaths: live.map((r) => returnPath(key, message.id, r.index)),
    subject: content.subject,
    text: content.text_body || undefined,
    html: content.html_body || undefined,
    attachments,
    headers: content.headers,
    messageIdHeader: message.message_id_header,
    dkim,
  }
}

/**
 * About what a message composes to: its bodies as UTF-8 and its attachments as base64 (4/3),
 * the bulk of any message; headers are noise beside them.
 */
export const dispatchBytes = (d: Pick<OutboundDispatch, "text" | "html" | "attachments">): number =>
  Buffer.byteLength(d.text ?? "", "utf8") + Buffer.byteLength(d.html ?? "", "utf8") +
  Math.ceil(d.attachments.reduce((n, a) => n + a.content.byteLength, 0) * 4 / 3)

export interface OutboundDispatcherShape {
  /** Sends a message this caller holds the lease of, and records the outcome. */
  readonly deliver: (message: OutboundMessageRow, dispatch: OutboundDispatch) => Effect.Effect<Delivered, DbError>
  /** Marks a queued message failed as a whole and refunds all of it. */
  readonly fail: (messageId: number, code: FailureCode) => Effect.Effect<OutboundMessageRow, DbError>
  /** Re-dispatches a queued message the worker claimed (rebuilt from the tables). */
  readonly recover: (message: OutboundMessageRow) => Effect.Effect<Delivered, DbError>
}

export class OutboundDispatcher extends Context.Service<OutboundDispatcher, OutboundDispatcherShape>()("app/OutboundDispatcher") {
  static readonly layer = Layer.effect(
    OutboundDispatcher,
    Effect.gen(function*() {
      const db = yield* Database
      const billing = yield* Billing
      const mailer = yield* OutboundMailer
      const senders = yield* SenderIdentities
      const events = yield* EventDeliveries
      const key = returnPathKey(yield* AppConfig)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))
      // What the provider is handed at once, in bytes (./limits.ts): large messages go a few at a time.
      const budget = yield* Semaphore.make(DISPATCH_BUDGET_BYTES)
      const send = (dispatch: OutboundDispatch) =>
        budget.withPermits(Math.max(1, Math.min(DISPATCH_BUDGET_BYTES, dispatchBytes(dispatch))))(mailer.send(dispatch))

      const reload = (id: number) => Effect.map(messagesByIds(db, [id]), (rows) => rows[0]!)

      /** Takes the message out of `queued` (locked); undefined when someone else already recorded it. */
      const lockQueued = (id: number) =>
        Effect.map(
          queryAs(
            db,
            QueuedRow,
            "SELECT user_id, amount_tzs, content_id FROM outbound_messages WHERE id = $1 AND status = 'queued' FOR UPDATE",
            [id],
          ),
          (rows) => rows[0],
        )

      const fail = Effect.fn("OutboundDispatcher.fail")(function*(messageId: number, code: FailureCode) {
        yield* db.transaction(Effect.gen(function*() {
          const queued = yield* lockQueued(messageId)
          if (!queued) return
          const at = yield* now
          yield* db.query(
            `UPDATE outbound_messages SET status = 'failed', error_code = $2, amount_tzs = 0, locked_until = NULL, updated_at = $3
              WHERE id = $1`,
            [messageId, code, at],
          )
          const dropped = yield* db.query<{ email: string }>(
            `UPDATE outbound_recipients SET status = 'failed', error = 'provider_error', updated_at = $2
              WHERE message_id = $1 AND status = 'queued' RETURNING email`,
            [messageId, at],
          )
          const reason = code === "PROVIDER_ERROR" ? "the mail provider did not accept the message" : `message not sent (${code})`
          yield* events.emit(
            queued.user_id,
            dropped.map((r) => dispatchEvent(messageId, { email: r.email, sent: false, code: null, response: reason })),
          )
          if (queued.amount_tzs > 0) {
            yield* billing.refund({
              userId: queued.user_id,
              amount: queued.amount_tzs,
              reference: { type: "outbound_message", id: messageId },
              description: code === "PROVIDER_ERROR" ? "refund: the mail provider did not accept the message" : `refund: message not sent (${code})`,
            }).pipe(Effect.catchTag("ValidationError", Effect.die))
          }
          // A single send that failed as a whole frees its Idempotency-Key: retrying it should send.
          yield* db.query(
            `DELETE FROM outbound_idempotency_keys k USING outbound_contents c
              WHERE k.content_id = $1 AND c.id = k.content_id AND c.kind = 'single'`,
            [queued.content_id],
          )
          yield* releaseAttachments(db, queued.content_id)
        }))
        yield* events.wake
        return yield* reload(messageId)
      })

      const record = (messageId: number, result: DispatchResult) =>
        db.transaction(Effect.gen(function*() {
          const queued = yield* lockQueued(messageId)
          if (!queued) return
          const at = yield* now
          const pending = yield* db.query<{ email: string }>(
            "SELECT email FROM outbound_recipients WHERE message_id = $1 AND status = 'queued'",
            [messageId],
          )
          const verdicts = new Map(result.recipients.map((v) => [normalizedEmail(v.email), v]))
          const outcomes = pending.map((r) => {
            const v = verdicts.get(normalizedEmail(r.email))
            const accepted = v?.accepted ?? false
            return {
              email: normalizedEmail(r.email),
              as: r.email,
              status: accepted ? "sent" : "failed",
              // Refused with a reply code: the address's answer. Without one: its transaction broke.
              error: accepted ? null : v?.code != null ? "rejected" : "provider_error",
              code: v?.code ?? null,
              response: v?.response ?? null,
              pmid: accepted ? (v?.providerMessageId ?? result.providerMessageId) : null,
            }
          })
          const failed = outcomes.filter((o) => o.status === "failed")
          const anySent = failed.length < outcomes.length
          const refund = failed.length * PRICE_PER_MESSAGE_TZS
          yield* db.query(
            `UPDATE outbound_recipients r
                SET status = v.status, error = v.error, provider_code = v.code, provider_message_id = v.pmid, updated_at = $3
               FROM jsonb_to_recordset($2::jsonb) AS v(email text, status text, error text, code int, pmid text)
              WHERE r.message_id = $1 AND r.status = 'queued' AND lower(r.email) = v.email`,
            [messageId, JSON.stringify(outcomes), at],
          )
          yield* db.query(
            `UPDATE outbound_messages
                SET status = $2, error_code = $3, provider_message_id = $4, amount_tzs = amount_tzs - $5,
                    locked_until = NULL, updated_at = $6
              WHERE id = $1`,
            [messageId, anySent ? "sent" : "failed", anySent ? null : "RECIPIENTS_REJECTED", anySent ? result.providerMessageId : null, refund, at],
          )
          // One refund entry per refused recipient (DECISIONS.md "Billing"), so the ledger says who.
          for (const o of failed) {
            yield* billing.refund({
              userId: queued.user_id,
              amount: PRICE_PER_MESSAGE_TZS,
              reference: { type: "outbound_message", id: messageId },
              description: `refund: ${o.email} refused by the mail provider${o.code ? ` (${o.code})` : ""}`,
            }).pipe(Effect.catchTag("ValidationError", Effect.die))
          }
          const permanent = failed.filter((o) => isPermanent(o.code))
          if (permanent.length > 0) {
            yield* db.query(
              `INSERT INTO suppressions (user_id, email, reason, provider_code, message_id, created_at)
               SELECT $1, v.email, 'rejected', v.code, $2, $3 FROM jsonb_to_recordset($4::jsonb) AS v(email text, code int)
               ON CONFLICT (user_id, email) DO NOTHING`,
              [queued.user_id, messageId, at, JSON.stringify(permanent.map((o) => ({ email: o.email, code: o.code })))],
            )
          }
          yield* events.emit(
            queued.user_id,
            outcomes.map((o): OutboundEvent => dispatchEvent(messageId, { email: o.as, sent: o.status === "sent", code: o.code, response: o.response })),
          )
          yield* releaseAttachments(db, queued.content_id)
        }))

      const deliver = Effect.fn("OutboundDispatcher.deliver")(function*(message: OutboundMessageRow, dispatch: OutboundDispatch) {
        const sent = yield* Effect.result(send(dispatch))
        if (sent._tag === "Failure") {
          yield* Effect.logWarning("outbound: the provider did not take the message").pipe(
            Effect.annotateLogs({ outbound_message_id: message.id, provider: mailer.kind, detail: sent.failure.detail ?? sent.failure.message }),
          )
          return { message: yield* fail(message.id, "PROVIDER_ERROR"), failure: Option.some(sent.failure) } satisfies Delivered
        }
        yield* record(message.id, sent.success)
        yield* events.wake
        return { message: yield* reload(message.id), failure: Option.none() } satisfies Delivered
      })

      const recover = Effect.fn("OutboundDispatcher.recover")(function*(message: OutboundMessageRow) {
        if (message.attempts > MAX_DISPATCH_ATTEMPTS) {
          return { message: yield* fail(message.id, "DISPATCH_ABANDONED"), failure: Option.none() } satisfies Delivered
        }
        const content = yield* contentOf(db, message.content_id)
        // The sender is checked again: the domain may have been suspended since the request.
        const identity = yield* Effect.result(senders.senderIdentity(message.user_id, {
          from_domain_id: message.domain_id ?? undefined,
          from_address: message.from_address,
        }))
        if (!content || identity._tag === "Failure") {
          if (identity._tag === "Failure" && identity.failure._tag === "DbError") return yield* identity.failure
          return { message: yield* fail(message.id, "SENDER_NOT_ALLOWED"), failure: Option.none() } satisfies Delivered
        }
        // Recipients are recorded together with the message, so a queued message's charged ones are all still queued.
        const recipients = yield* recipientsOf(db, message.id)
        const attachments = yield* attachmentsOf(db, message.content_id)
        return yield* deliver(message, buildDispatch(message, content, recipients, attachments, identity.success.dkim, key))
      })

      return OutboundDispatcher.of({ deliver, fail, recover })
    }),
  )
}
