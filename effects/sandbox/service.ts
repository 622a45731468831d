/**
 * The sandbox's captured messages: what the capture SMTP server stores instead of delivering,
 * and the reads over it. Capture is free (no wallet, works at a zero balance) but bounded: each
 * account may capture `SandboxLimits.monthlyCaptures` messages per calendar month (UTC). The
 * month's count lives in `sandbox_usage`, taken by one conditional upsert in the transaction that
 * stores the message, so concurrent captures can never pass the cap and clearing the captured
 * messages does not hand the allowance back.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { inMemory, isMessageBytes, type MessageBytes } from "../ingest/bytes.ts"
import { parseMessage } from "../ingest/parse.ts"
import { attachmentRows, messageColumns } from "../ingest/rows.ts"
import { pgSafe, safeJson } from "../ingest/text.ts"
import type { AttachmentMeta, TlsFacts } from "../messages/schema.ts"
import { type Forbidden, LimitReached, NotFound } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { toBase64 } from "../shared/crypto.ts"
import { owned } from "../shared/ownership.ts"
import { bodiesIn, byId, type HeavyPage, heavyPage, pageBodyColumns } from "../shared/heavy-pages.ts"
import { type Pagination, pagination } from "../shared/schema.ts"
import { monthLabel, SandboxLimits } from "./limits.ts"
import { CAPTURED_COLUMNS, type CapturedMessage, type CapturedMessageRow, type SandboxUsage, toCapturedMessage } from "./schema.ts"

/** A message as the capture server received it. */
export interface Submission {
  /** The bytes in memory, or wherever the SMTP server keeps them (a spool file). */
  readonly raw: Uint8Array | MessageBytes
  /** MAIL FROM ('' for the null sender). */
  readonly mailFrom: string
  /** RCPT TO addresses as given, in order. */
  readonly recipients: ReadonlyArray<string>
  /** The session's TLS, or null in plaintext (stored with the message). */
  readonly tls?: TlsFacts | null
}

export interface SandboxShape {
  /** Fails LIMIT_REACHED when the account has used up this month's captures. */
  readonly admit: (userId: number) => Effect.Effect<void, LimitReached | DbError>
  /** Parses and stores the message for the account (`credentialId`: the credential that sent it); returns its id. */
  readonly capture: (
    userId: number,
    credentialId: number | null,
    submission: Submission,
  ) => Effect.Effect<number, LimitReached | DbError>
  /** The account's captured messages, newest first; attachments without content. */
  readonly list: (
    userId: number,
    page: { readonly page: number; readonly perPage: number },
  ) => Effect.Effect<HeavyPage<CapturedMessage, DbError, never> & { readonly pagination: Pagination }, DbError>
  /** One captured message with base64 attachment content. */
  readonly get: (userId: number, id: number) => Effect.Effect<CapturedMessage, NotFound | Forbidden | DbError>
  /** The message exactly as submitted. */
  readonly raw: (userId: number, id: number) => Effect.Effect<Uint8Array, NotFound | Forbidden | DbError>
  /** Deletes every captured message of the account; returns how many. The month's count stays. */
  readonly clear: (userId: number) => Effect.Effect<number, DbError>
  /** This month's captures against the allowance. */
  readonly usage: (userId: number) => Effect.Effect<SandboxUsage, DbError>
}

/** `YYYY-MM-01`, as the `date` column takes it (a JS Date would go through the session time zone). */
const monthKey = (at: Date): string => `${monthLabel(at)}-01`

export class Sandbox extends Context.Service<Sandbox, SandboxShape>()("app/Sandbox") {
  static readonly layer = Layer.effect(
    Sandbox,
    Effect.gen(function*() {
      const db = yield* Database
      const limits = yield* SandboxLimits
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const limitReached = (at: Date) => {
        const next = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1))
        return new LimitReached({
          message: `the sandbox has captured its ${limits.monthlyCaptures} messages for ${monthLabel(at)}; capture resumes on ${
            next.toISOString().slice(0, 10)
          } (UTC)`,
        })
      }

      const capturedThisMonth = (userId: number, at: Date) =>
        Effect.map(
          db.query<{ captured: number }>("SELECT captured FROM sandbox_usage WHERE user_id = $1 AND month = $2::date", [userId, monthKey(at)]),
          (rows) => rows[0]?.captured ?? 0,
        )

      const admit = Effect.fn("Sandbox.admit")(function*(userId: number) {
        const at = yield* now
        if ((yield* capturedThisMonth(userId, at)) >= limits.monthlyCaptures) return yield* limitReached(at)
      })

      /** Takes one capture of the month, or fails when none is left (the row lock holds until commit). */
      const takeSlot = (userId: number, at: Date) =>
        Effect.gen(function*() {
          if (limits.monthlyCaptures <= 0) return yield* limitReached(at)
          const rows = yield* db.query(
            `INSERT INTO sandbox_usage AS u (user_id, month, captured) VALUES ($1, $2::date, 1)
             ON CONFLICT (user_id, month) DO UPDATE SET captured = u.captured + 1 WHERE u.captured < $3
             RETURNING captured`,
            [userId, monthKey(at), limits.monthlyCaptures],
          )
          if (rows.length === 0) return yield* limitReached(at)
        })

      const capture = Effect.fn("Sandbox.capture")(function*(userId: number, credentialId: number | null, s: Submission) {
        const at = yield* now
        const message = isMessageBytes(s.raw) ? s.raw : inMemory(s.raw)
        const parsed = yield* parseMessage(message)
        // The same row shapes as the MX's messages; every string safe for its column whatever the app sent.
        const columns = messageColumns(parsed, s.mailFrom)
        const recipients = s.recipients.map(pgSafe)
        const raw = (yield* Effect.promise(() => message.read())).toString("base64")
        return yield* db.transaction(Effect.gen(function*() {
          const [row] = yield* db.query<{ id: number }>(
            `INSERT INTO sandbox_messages (user_id, credential_id, envelope_from, from_addr, to_addr, recipients, subject, text_body,
                                           html_body, headers, attachments, message_id, size, raw, received_at, tls)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, decode($14, 'base64'), $15, $16) RETURNING id`,
            [
              userId,
              credentialId,
              columns.envelope_from,
              columns.from_addr,
              recipients[0] ?? "",
              safeJson(recipients),
              columns.subject,
              columns.text_body,
              columns.html_body,
              JSON.stringify(columns.headers),
              JSON.stringify(columns.attachments),
              columns.message_id,
              message.size,
              raw,
              at,
              s.tls ? JSON.stringify({ protocol: s.tls.protocol, cipher: s.tls.cipher }) : null,
            ],
          )
          const parts = attachmentRows(parsed)
          if (parts.length > 0) {
            yield* db.query(
              `INSERT INTO sandbox_attachments (message_id, position, filename, content_type, content_id, size, content)
               SELECT $1, a.position, a.filename, a.content_type, a.content_id, a.size, decode(a.content, 'base64')
                 FROM json_to_recordset($2::json) AS a (position int4, filename text, content_type text, content_id text, size int4, content text)`,
              [row!.id, JSON.stringify(parts)],
            )
          }
          // Last, so the account's usage row stays locked only until the commit that follows.
          yield* takeSlot(userId, at)
          return row!.id
        }))
      })

      const ownedRow = (userId: number, id: number) =>
        Effect.flatMap(
          db.query<CapturedMessageRow>(`SELECT ${CAPTURED_COLUMNS} FROM sandbox_messages WHERE id = $1`, [id]),
          (rows) => owned("captured message", rows, userId),
        )

      const list = Effect.fn("Sandbox.list")(function*(userId: number, q: { page: number; perPage: number }) {
        const [count] = yield* db.query<{ n: number }>("SELECT count(*)::int AS n FROM sandbox_messages WHERE user_id = $1", [userId])
        const total = count?.n ?? 0
        const offset = (q.page - 1) * q.perPage
        if (offset >= total) return { data: [], more: [], pagination: pagination(q.page, q.perPage, total) }
        // Large bodies are fetched as the answer is written (../shared/heavy-pages.ts).
        const rows = yield* db.query<CapturedMessageRow & { body_bytes: number }>(
          `SELECT ${CAPTURED_COLUMNS.replace("text_body, html_body", pageBodyColumns())} FROM sandbox_messages
            WHERE user_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3`,
          [userId, q.perPage, offset],
        )
        type Bodies = Pick<CapturedMessageRow, "text_body" | "html_body">
        const bodies = (ids: ReadonlyArray<number>) => Effect.map(bodiesIn(db, "sandbox_messages", userId)<Bodies & { id: number }>(ids), byId)
        const page = heavyPage(rows, bodies, (row, b: Bodies | undefined) => toCapturedMessage(b ? { ...row, ...b } : row))
        return { ...page, pagination: pagination(q.page, q.perPage, total) }
      })

      const get = Effect.fn("Sandbox.get")(function*(userId: number, id: number) {
        const row = yield* ownedRow(userId, id)
        const parts = yield* db.query<AttachmentMeta & { content: Uint8Array }>(
          "SELECT filename, content_type, content_id, size, content FROM sandbox_attachments WHERE message_id = $1 ORDER BY position",
          [id],
        )
        return toCapturedMessage(
          row,
          parts.map((p) => ({ filename: p.filename, content_type: p.content_type, size: p.size, content_id: p.content_id, content: toBase64(p.content) })),
        )
      })

      const raw = Effect.fn("Sandbox.raw")(function*(userId: number, id: number) {
        yield* ownedRow(userId, id)
        const [row] = yield* db.query<{ raw: Uint8Array }>("SELECT raw FROM sandbox_messages WHERE id = $1", [id])
        if (!row) return yield* new NotFound({ message: "captured message not found" })
        return row.raw
      })

      const clear = Effect.fn("Sandbox.clear")(function*(userId: number) {
        const [deleted] = yield* db.query<{ n: number }>(
          "WITH gone AS (DELETE FROM sandbox_messages WHERE user_id = $1 RETURNING 1) SELECT count(*)::int AS n FROM gone",
          [userId],
        )
        return deleted?.n ?? 0
      })

      const usage = Effect.fn("Sandbox.usage")(function*(userId: number) {
        const at = yield* now
        const captured = yield* capturedThisMonth(userId, at)
        return { month: monthLabel(at), captured, limit: limits.monthlyCaptures, remaining: Math.max(0, limits.monthlyCaptures - captured) }
      })

      return Sandbox.of({ admit, capture, list, get, raw, clear, usage })
    }),
  )
}
