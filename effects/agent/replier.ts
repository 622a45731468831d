/**
 * One attempt at an AgentJob: load the message, apply the skip rules, ask the AI for a reply,
 * then store it as a draft (`draft`) or send it through outbound (`auto`), and record the
 * outcome — replied, drafted, skipped (with the reason) or failed — or the next retry.
 *
 * Guarantees, on the worker pattern's lease (take-then-record: an attempt is counted before it
 * is made, and only the lease holder may record):
 * - AI and outbound-provider failures (timeouts, 429, 5xx) are retried with backoff 30 s, 90 s,
 *   270 s, 810 s, at most AGENT_MAX_ATTEMPTS attempts; refusals (bad key, no balance, a From no
 *   longer allowed, suppressed) fail at once, so nothing storms. The account's outbound send rate
 *   being busy is waited out (Retry-After plus jitter) without spending an attempt.
 * - At most one reply per message: the row is marked `sending_at` before the send is handed to
 *   outbound; an attempt that finds the mark of an interrupted one fails instead of sending again.
 * - At most one auto reply per sender and thread in 24 h (by Clock): checked and marked under a
 *   per-thread advisory lock, so two messages of one thread worked at once cannot both answer.
 * - The generated reply is kept on the row, so a retried send does not ask the AI again.
 *
 * OutboundSender is optional here: it is taken when this layer is built (by the worker, after
 * every service), and without it auto replies fail with a recorded reason.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Random } from "effect"
import { Billing } from "../billing/service.ts"
import { AppConfig } from "../config.ts"
import type { NotConfigured, ProviderError } from "../errors.ts"
import { OutboundSender, type SendRequest } from "../outbound/contract.ts"
import { delayAfter, retrySchedule } from "../deliveries/retry.ts"
import { AiGateway, retryableAiError } from "../ports/AiGateway.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { MimeBlobs } from "../ports/MimeBlobs.ts"
import { BLOB_TEXT_COLUMNS, type BlobTextRow, withBlobTexts } from "../messages/blob-text.ts"
import { mailboxById } from "./mailbox.ts"
import { MAX_THREAD_TURNS, type MailTurn, replyPrompt, textOf } from "./prompt.ts"
import { addressOf, replySubject, replyTo, type RuleInput, skipReason, threadingHeaders, threadKey } from "./rules.ts"
import type { AgentConfigRow, AgentJobRow, AgentJobStatus } from "./schema.ts"

export const AGENT_MAX_ATTEMPTS = 5
/**
 * Lease of one attempt: an AI call (30 s at most) and a send through outbound (a slow relay can
 * take a minute or more), with room to spare. It is also how long a crashed instance's job waits.
 */
export const AGENT_LEASE: Duration.Input = "5 minutes"
/** An auto reply costs what any outbound recipient costs. */
export const AUTO_REPLY_PRICE_TZS = 5
const ANSWERED_WINDOW_MS = 24 * 60 * 60 * 1000

/** Waits between attempts: 30 s, 90 s, 270 s, 810 s (the shared retry schedule). */
const agentSchedule = retrySchedule("30 seconds", AGENT_MAX_ATTEMPTS)

interface MessageRow extends BlobTextRow {
  readonly id: number
  readonly address_id: number
  readonly user_id: number
  readonly from_addr: string
  readonly to_addr: string
  readonly envelope_from: string
  readonly subject: string
  readonly text_body: string
  readonly html_body: string
  readonly headers: Record<string, unknown>
  readonly message_id: string | null
  readonly received_at: Date
}

export interface AgentReplierShape {
  /** Makes the next attempt of a claimed job; returns when the following one is due, if any. */
  readonly attempt: (job: AgentJobRow) => Effect.Effect<Option.Option<Date>, DbError>
}

export class AgentReplier extends Context.Service<AgentReplier, AgentReplierShape>()("app/AgentReplier") {
  static readonly layer = Layer.effect(
    AgentReplier,
    Effect.gen(function*() {
      const db = yield* Database
      const blobs = yield* MimeBlobs
      const config = yield* AppConfig
      const ai = yield* AiGateway
      const billing = yield* Billing
      const outbound = yield* Effect.serviceOption(OutboundSender)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      /** Records an outcome, if this attempt still holds the lease. */
      const record = (job: AgentJobRow, n: number, status: AgentJobStatus, fields: {
        readonly reason?: string | null
        readonly nextAt?: Date | null
        readonly outboundId?: number | null
        /** Give the attempt back (a rate-limited send was not a failure of the reply). */
        readonly refund?: boolean
      } = {}) =>
        Effect.gen(function*() {
          const finishedAt = status === "pending" ? null : yield* now
          yield* db.query(
            `UPDATE agent_jobs
                SET status = $4, reason = $5, next_attempt_at = $6, finished_at = $7,
                    outbound_message_id = COALESCE($8, outbound_message_id), sending_at = NULL, locked_until = NULL,
                    attempt = CASE WHEN $9 THEN attempt - 1 ELSE attempt END
              WHERE id = $1 AND attempt = $2 AND locked_until = $3`,
            [job.id, n, job.locked_until, status, fields.reason ?? null, fields.nextAt ?? null, finishedAt, fields.outboundId ?? null, fields.refund ?? false],
          )
        })

      const finish = (job: AgentJobRow, n: number, status: "skipped" | "failed", reason: string) =>
        Effect.as(record(job, n, status, { reason }), Option.none<Date>())

      /** A retry after the schedule's wait when the error may pass and attempts remain, else failed. */
      const retryOrFail = (job: AgentJobRow, n: number, reason: string, retryable: boolean) =>
        Effect.gen(function*() {
          const delay = retryable ? yield* delayAfter(agentSchedule, n) : Option.none<Duration.Duration>()
          if (Option.isNone(delay)) return yield* finish(job, n, "failed", reason)
          const nextAt = new Date((yield* now).getTime() + Duration.toMillis(delay.value))
          yield* record(job, n, "pending", { reason, nextAt })
          return Option.some(nextAt)
        })

      const answeredSince = (job: AgentJobRow, sender: string, thread: string, since: Date) =>
        Effect.map(
          db.query(
            `SELECT 1 FROM agent_jobs
              WHERE address_id = $1 AND sender = $2 AND thread_key = $3 AND id <> $4
                AND ((status = 'replied' AND finished_at > $5) OR (status = 'pending' AND sending_at IS NOT NULL))
              LIMIT 1`,
            [job.address_id, sender, thread, job.id, since],
          ),
          (rows) => rows.length > 0,
        )

      /** Earlier turns of the thread, oldest first: the sender's messages and the agent's replies. */
      const threadOf = (message: MessageRow, sender: string, thread: string) =>
        Effect.gen(function*() {
          const pattern = `%${sender.replace(/[\\%_]/g, "\\$&")}%`
          const candidates = yield* db.query<
            Pick<MessageRow, "id" | "from_addr" | "subject" | "text_body" | "html_body" | "received_at" | "text_blob" | "text_range">
          >(
            `SELECT id, from_addr, subject, text_body, html_body, received_at, ${BLOB_TEXT_COLUMNS} FROM inbound_messages
              WHERE address_id = $1 AND id < $2 AND from_addr ILIKE $3 ORDER BY id DESC LIMIT 50`,
            [message.address_id, message.id, pattern],
          )
          // Texts kept in files are read for the turns the prompt takes only.
          const inbound = yield* withBlobTexts(
            blobs,
            candidates.filter((m) => addressOf(m.from_addr) === sender && threadKey(m.subject) === thread).slice(0, MAX_THREAD_TURNS),
          )
          const replies = yield* db.query<{ message_id: number; reply_text: string }>(
            `SELECT message_id, reply_text FROM agent_jobs
              WHERE address_id = $1 AND sender = $2 AND thread_key = $3 AND status = 'replied' AND message_id < $4 AND reply_text IS NOT NULL
              ORDER BY message_id DESC LIMIT $5`,
            [message.address_id, sender, thread, message.id, MAX_THREAD_TURNS],
          )
          const turns: Array<{ readonly key: number; readonly turn: MailTurn }> = [
            ...inbound
              .map((m) => ({
                key: m.id * 2,
                turn: { kind: "inbound", from: m.from_addr, subject: m.subject, body: textOf(m.text_body, m.html_body), at: m.received_at } as const,
              })),
            ...replies.map((r) => ({ key: r.message_id * 2 + 1, turn: { kind: "reply", subject: "", body: r.reply_text } as const })),
          ]
          return turns.sort((a, b) => a.key - b.key).map((t) => t.turn)
        })

      const storeDraft = (job: AgentJobRow, n: number, to: string, subject: string, text: string) =>
        db.transaction(Effect.gen(function*() {
          const at = yield* now
          const [mine] = yield* db.query(
            `UPDATE agent_jobs SET status = 'drafted', reason = NULL, next_attempt_at = NULL, finished_at = $4, sending_at = NULL, locked_until = NULL
              WHERE id = $1 AND attempt = $2 AND locked_until = $3 RETURNING id`,
            [job.id, n, job.locked_until, at],
          )
          if (!mine) return
          const [draft] = yield* db.query<{ id: number }>(
            `INSERT INTO agent_drafts (user_id, address_id, message_id, to_address, subject, text_body, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (message_id) DO UPDATE SET text_body = EXCLUDED.text_body
             RETURNING id`,
            [job.user_id, job.address_id, job.message_id, to, subject, text, at],
          )
          yield* db.query("UPDATE agent_jobs SET draft_id = $2 WHERE id = $1", [job.id, draft!.id])
        })).pipe(Effect.as(Option.none<Date>()))

      /**
       * Under the thread's lock: skip when the thread was answered meanwhile, else mark the send
       * as started (with the text, sender and thread) so it counts as answered from now on.
       */
      const claimSend = (job: AgentJobRow, n: number, sender: string, thread: string, text: string) =>
        db.transaction(Effect.gen(function*() {
          const at = yield* now
          yield* db.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`agent_thread:${job.address_id}:${sender}:${thread}`])
          if (yield* answeredSince(job, sender, thread, new Date(at.getTime() - ANSWERED_WINDOW_MS))) {
            yield* record(job, n, "skipped", { reason: "already answered this sender in this thread in the last 24 hours" })
            return "answered" as const
          }
          const [mine] = yield* db.query(
            `UPDATE agent_jobs SET sending_at = $4, reply_text = $5, sender = $6, thread_key = $7
              WHERE id = $1 AND attempt = $2 AND locked_until = $3 AND status = 'pending' RETURNING id`,
            [job.id, n, job.locked_until, at, text, sender, thread],
          )
          return mine ? ("claimed" as const) : ("lost" as const)
        }))

      const aiFailure = (job: AgentJobRow, n: number, e: ProviderError | NotConfigured) =>
        retryOrFail(
          job,
          n,
          e._tag === "NotConfigured" ? "the AI gateway is not configured on this server" : `the AI gateway failed (${e.detail ?? "error"})`,
          retryableAiError(e),
        )

      const send = (job: AgentJobRow, n: number, request: SendRequest) =>
        Effect.gen(function*() {
          if (Option.isNone(outbound)) return yield* finish(job, n, "failed", "outbound email is not available on this server")
          const sent = yield* Effect.result(outbound.value.send(job.user_id, request))
          if (sent._tag === "Success") {
            if (sent.success.status === "sent") return yield* Effect.as(record(job, n, "replied", { outboundId: sent.success.id }), Option.none<Date>())
            yield* record(job, n, "failed", { reason: "the outbound provider refused the reply", outboundId: sent.success.id })
            return Option.none<Date>()
          }
          const e = sent.failure
          switch (e._tag) {
            case "InsufficientBalance":
              return yield* finish(job, n, "failed", `insufficient balance: an auto reply costs ${AUTO_REPLY_PRICE_TZS} TZS`)
            case "RateLimited": {
              // The account's send rate (shared with its own API sends) is busy: wait it out without
              // spending an attempt; the kept text means no new AI call.
              // Under a second of jitter: Effect 4's nextIntBetween includes its upper bound unless half-open.
              const jitter = yield* Random.nextIntBetween(0, 1000, { halfOpen: true })
              const nextAt = new Date((yield* now).getTime() + Math.max(1, e.retry_after_seconds) * 1000 + jitter)
              yield* record(job, n, "pending", { reason: "outbound rate limit reached; waiting", nextAt, refund: true })
              return Option.some(nextAt)
            }
            case "ProviderError":
              return yield* retryOrFail(job, n, "the outbound provider failed (the charge was refunded)", true)
            case "Suppressed":
              return yield* finish(job, n, "failed", "the sender is on this account's suppression list")
            case "DbError":
              yield* Effect.logError("agent: outbound send failed", e)
              return yield* finish(job, n, "failed", "an internal error interrupted the send; not retried so the sender never gets two replies")
            default:
              return yield* finish(job, n, "failed", `the reply could not be sent: ${e.message}`)
          }
        })

      const attempt = Effect.fn("AgentReplier.attempt")(function*(job: AgentJobRow) {
        if (job.attempt >= AGENT_MAX_ATTEMPTS) return yield* finish(job, job.attempt, "failed", "attempt interrupted (instance stopped); no attempts left")
        const [taken] = yield* db.query<AgentJobRow>(
          `UPDATE agent_jobs SET attempt = attempt + 1
            WHERE id = $1 AND attempt = $2 AND locked_until = $3 AND status = 'pending' RETURNING *`,
          [job.id, job.attempt, job.locked_until],
        )
        if (!taken) return Option.none<Date>()
        const n = taken.attempt
        if (taken.sending_at !== null) {
          return yield* finish(job, n, "failed", "interrupted while the reply was being sent; not sent again so the sender never gets two replies")
        }
        const [cfg] = yield* db.query<AgentConfigRow>("SELECT * FROM agent_configs WHERE address_id = $1", [job.address_id])
        if (!cfg || !cfg.enabled || cfg.mode === "off") return yield* finish(job, n, "skipped", "the agent was turned off for this address")
        const [message] = yield* db.query<MessageRow>(
          `SELECT id, address_id, user_id, from_addr, to_addr, envelope_from, subject, text_body, html_body, headers, message_id, received_at,
                  ${BLOB_TEXT_COLUMNS}
             FROM inbound_messages WHERE id = $1`,
          [job.message_id],
        ).pipe(Effect.flatMap((rows) => withBlobTexts(blobs, rows)))
        // Gone (retention, address deleted; or its text's file, after the row was read): the job row went with it.
        if (!message) return Option.none<Date>()
        const rules: RuleInput = { fromAddr: message.from_addr, toAddr: message.to_addr, envelopeFrom: message.envelope_from, headers: message.headers ?? {} }
        const skip = skipReason(rules)
        if (skip !== undefined) return yield* finish(job, n, "skipped", skip)
        const sender = addressOf(message.from_addr)!
        const to = replyTo(rules) ?? sender
        const thread = threadKey(message.subject)

        if (cfg.mode === "auto") {
          const since = new Date((yield* now).getTime() - ANSWERED_WINDOW_MS)
          if (yield* answeredSince(job, sender, thread, since)) {
            return yield* finish(job, n, "skipped", "already answered this sender in this thread in the last 24 hours")
          }
          if (Option.isNone(outbound)) return yield* finish(job, n, "failed", "outbound email is not available on this server")
          // No AI call for a reply that could not be paid for.
          if ((yield* billing.balance(job.user_id)) < AUTO_REPLY_PRICE_TZS) {
            return yield* finish(job, n, "failed", `insufficient balance: an auto reply costs ${AUTO_REPLY_PRICE_TZS} TZS`)
          }
        }

        let text = taken.reply_text
        if (text === null) {
          const box = yield* mailboxById(db, config.platformDomain, job.address_id)
          const history = yield* threadOf(message, sender, thread)
          const inbound: MailTurn = {
            kind: "inbound",
            from: message.from_addr,
            subject: message.subject,
            body: textOf(message.text_body, message.html_body),
            at: message.received_at,
          }
          const answer = yield* Effect.result(ai.complete(replyPrompt({ persona: cfg.persona, mailbox: box?.email }, history, inbound)))
          if (answer._tag === "Failure") return yield* aiFailure(job, n, answer.failure)
          text = answer.success
        }
        const subject = replySubject(message.subject)
        if (cfg.mode === "draft") return yield* storeDraft(job, n, to, subject, text)

        const claimed = yield* claimSend(job, n, sender, thread, text)
        if (claimed !== "claimed") return Option.none<Date>()
        return yield* send(job, n, {
          to: [to],
          subject,
          text_body: text,
          ...(cfg.reply_from_domain_id !== null ? { from_domain_id: cfg.reply_from_domain_id } : {}),
          ...(cfg.reply_from_address !== null ? { from_address: cfg.reply_from_address } : {}),
          headers: {
            ...threadingHeaders(message.headers ?? {}, message.message_id),
            "Auto-Submitted": "auto-replied",
            "X-Auto-Response-Suppress": "All",
          },
        })
      })

      return AgentReplier.of({ attempt })
    }),
  )
}
