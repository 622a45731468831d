/**
 * Reading stored inbound messages: the paged list of one address (newest first), one message
 * with its bodies and base64 attachments, its raw MIME, and the read flag. Every read is scoped
 * to the caller: another account's message or address is FORBIDDEN, a missing one NOT_FOUND.
 *
 * The list stays fast at millions of rows: it walks the (address_id, -id) index and takes its
 * total from the address's counters instead of counting; a page and a message are one statement each.
 */
import { Context, Effect, Layer } from "effect"
import { Forbidden, NotFound } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { MimeBlobs } from "../ports/MimeBlobs.ts"
import { bodiesIn, byId, type HeavyPage, heavyPage, isHeavy, pageBodyColumns } from "../shared/heavy-pages.ts"
import { type Pagination, pagination } from "../shared/schema.ts"
import { BLOB_TEXT_BYTES, BLOB_TEXT_COLUMNS, withBlobTexts } from "./blob-text.ts"
import { type AttachmentMeta, type InboundMessage, type InboundMessageRow, MESSAGE_COLUMNS, toInboundMessage } from "./schema.ts"

export interface ListMessages {
  readonly addressId: number
  readonly unreadOnly: boolean
  readonly page: number
  readonly perPage: number
}

export interface InboundMessagesShape {
  /** The page: its items at hand in `data`, those with large bodies in `more` (../shared/heavy-pages.ts). */
  readonly list: (
    userId: number,
    q: ListMessages,
  ) => Effect.Effect<HeavyPage<InboundMessage, DbError, never> & { readonly pagination: Pagination }, Forbidden | NotFound | DbError>
  /** One message of the caller with full bodies and attachment content. */
  readonly get: (userId: number, id: number) => Effect.Effect<InboundMessage, Forbidden | NotFound | DbError>
  /** The message as received (trace headers prepended), for `message/rfc822`. */
  readonly raw: (userId: number, id: number) => Effect.Effect<Uint8Array, Forbidden | NotFound | DbError>
  /** Marks it read (idempotent) and returns it. */
  readonly markRead: (userId: number, id: number) => Effect.Effect<InboundMessage, Forbidden | NotFound | DbError>
}

const notFound = () => new NotFound({ message: "inbound message not found" })

/**
 * A page's columns: MESSAGE_COLUMNS, with the bodies of a heavy row left out (../shared/heavy-pages.ts);
 * a text kept in its file counts towards its row's size.
 */
const PAGE_COLUMNS = MESSAGE_COLUMNS.replace("text_body, html_body", pageBodyColumns("text_body", "html_body", BLOB_TEXT_BYTES))

type Bodies = Pick<InboundMessageRow, "text_body" | "html_body" | "text_blob" | "text_range">

export class InboundMessages extends Context.Service<InboundMessages, InboundMessagesShape>()("app/InboundMessages") {
  static readonly layer = Layer.effect(
    InboundMessages,
    Effect.gen(function*() {
      const db = yield* Database
      const blobs = yield* MimeBlobs

      const load = (id: number) =>
        Effect.gen(function*() {
          const [row] = yield* db.query<InboundMessageRow>(`SELECT ${MESSAGE_COLUMNS} FROM inbound_messages WHERE id = $1`, [id])
          if (!row) return yield* notFound()
          return row
        })

      const owned = (userId: number, id: number) =>
        Effect.gen(function*() {
          const row = yield* load(id)
          if (row.user_id !== userId) return yield* new Forbidden({ message: "this message belongs to another account" })
          return row
        })

      // One statement per page: the address (owner, counters) and, only when it is the caller's
      // and the page is not past the end, the page itself. The total is the address's counter
      // (kept with every insert, purge and read flag), so no page ever counts rows.
      const list = Effect.fn("InboundMessages.list")(function*(userId: number, q: ListMessages) {
        const offset = (q.page - 1) * q.perPage
        // Newest first as `-id`: only the (address_id, (-id)) indexes yield that order, so the planner
        // cannot pick a backward primary-key scan instead (see 004_inbound.sql).
        const rows = yield* db.query<
          Partial<InboundMessageRow> & { owner: number; message_count: number; unread_count: number; body_bytes: number }
        >(
          `SELECT a.user_id AS owner, a.message_count, a.unread_count, m.*
             FROM inbound_addresses a
             LEFT JOIN LATERAL (
               SELECT ${PAGE_COLUMNS} FROM inbound_messages
                WHERE address_id = a.id ${q.unreadOnly ? "AND NOT is_read" : ""}
                  AND a.user_id = $4 AND $3 < ${q.unreadOnly ? "a.unread_count" : "a.message_count"}
                ORDER BY -id LIMIT $2 OFFSET $3
             ) m ON true
            WHERE a.id = $1`,
          [q.addressId, q.perPage, offset, userId],
        )
        const address = rows[0]
        if (!address) return yield* new NotFound({ message: "inbound address not found" })
        if (address.owner !== userId) return yield* new Forbidden({ message: "this address belongs to another account" })
        const total = Math.max(0, q.unreadOnly ? address.unread_count : address.message_count)
        const rowsOfPage = address.id == null ? [] : rows as ReadonlyArray<InboundMessageRow & { body_bytes: number }>
        // Light rows' texts kept in files are read now; heavy rows' with their bodies, group by group.
        const page = yield* withBlobTexts(blobs, rowsOfPage, (row) => !isHeavy(row))
        const bodies = (ids: ReadonlyArray<number>) =>
          bodiesIn(db, "inbound_messages", userId, BLOB_TEXT_COLUMNS)<Bodies & { id: number }>(ids).pipe(
            Effect.flatMap((found) => withBlobTexts(blobs, found)),
            Effect.map(byId),
          )
        const { data, more } = heavyPage(page, bodies, (row, b: Bodies | undefined) => toInboundMessage(b ? { ...row, ...b } : row))
        return { data, more, pagination: pagination(q.page, q.perPage, total) }
      })

      // The message and, when it is the caller's, its attachments (base64) in one statement.
      const get = Effect.fn("InboundMessages.get")(function*(userId: number, id: number) {
        const [row] = yield* db.query<InboundMessageRow & { parts: ReadonlyArray<AttachmentMeta & { content: string }> | null }>(
          `SELECT ${MESSAGE_COLUMNS},
                  CASE WHEN m.user_id = $2 AND m.mime_id IS NOT NULL THEN (
                    SELECT json_agg(json_build_object('filename', filename, 'content_type', content_type, 'size', size,
                                                      'content_id', content_id, 'content', translate(encode(content, 'base64'), E'\\n', ''))
                                    ORDER BY position)
                      FROM inbound_attachments WHERE mime_id = m.mime_id
                  ) END AS parts
             FROM inbound_messages m WHERE m.id = $1`,
          [id, userId],
        )
        if (!row) return yield* notFound()
        if (row.user_id !== userId) return yield* new Forbidden({ message: "this message belongs to another account" })
        const [whole] = yield* withBlobTexts(blobs, [row])
        // Its text's file gone: the message was deleted after the statement read it.
        if (!whole) return yield* notFound()
        return toInboundMessage(whole, { attachments: whole.parts ?? [] })
      })

      const raw = Effect.fn("InboundMessages.raw")(function*(userId: number, id: number) {
        const row = yield* owned(userId, id)
        const [mime] = row.mime_id === null
          ? []
          : yield* db.query<{ raw: Uint8Array; body_blob: string | null }>("SELECT raw, body_blob FROM inbound_mime WHERE id = $1", [row.mime_id])
        if (!mime) return yield* notFound()
        if (mime.body_blob === null) return mime.raw
        // A large message: the trace in the row, the body as received in its file (effects/ports/MimeBlobs.ts).
        return Buffer.concat([mime.raw, yield* blobs.read(mime.body_blob)])
      })

      const markRead = Effect.fn("InboundMessages.markRead")(function*(userId: number, id: number) {
        yield* owned(userId, id)
        yield* db.transaction(Effect.gen(function*() {
          const [changed] = yield* db.query<{ address_id: number }>(
            "UPDATE inbound_messages SET is_read = true WHERE id = $1 AND NOT is_read RETURNING address_id",
            [id],
          )
          if (changed) {
            yield* db.query("UPDATE inbound_addresses SET unread_count = unread_count - 1 WHERE id = $1", [changed.address_id])
          }
        }))
        return yield* get(userId, id)
      })

      return InboundMessages.of({ list, get, raw, markRead })
    }),
  )
}
