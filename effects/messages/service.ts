/**
 * Reading stored inbound messages: the paged list of one address (newest first), one message
 * with its bodies and base64 attachments, its raw MIME, and the read flag. Every read is scoped
 * to the caller: another account's message or address is FORBIDDEN, a missing one NOT_FOUND.
 *
 * The list stays fast at millions of rows: it walks the (address_id, id DESC) index and takes
 * its total from the address's counters instead of counting.
 */
import { Context, Effect, Layer } from "effect"
import { Forbidden, NotFound } from "../errors.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { toBase64 } from "../shared/crypto.ts"
import { type Pagination, pagination } from "../shared/schema.ts"
import { type AttachmentMeta, type InboundMessage, type InboundMessageRow, MESSAGE_COLUMNS, toInboundMessage } from "./schema.ts"

export interface ListMessages {
  readonly addressId: number
  readonly unreadOnly: boolean
  readonly page: number
  readonly perPage: number
}

export interface InboundMessagesShape {
  readonly list: (
    userId: number,
    q: ListMessages,
  ) => Effect.Effect<{ readonly data: ReadonlyArray<InboundMessage>; readonly pagination: Pagination }, Forbidden | NotFound | DbError>
  /** One message of the caller with full bodies and attachment content. */
  readonly get: (userId: number, id: number) => Effect.Effect<InboundMessage, Forbidden | NotFound | DbError>
  /** The message as received (trace headers prepended), for `message/rfc822`. */
  readonly raw: (userId: number, id: number) => Effect.Effect<Uint8Array, Forbidden | NotFound | DbError>
  /** Marks it read (idempotent) and returns it. */
  readonly markRead: (userId: number, id: number) => Effect.Effect<InboundMessage, Forbidden | NotFound | DbError>
}

const notFound = () => new NotFound({ message: "inbound message not found" })

export class InboundMessages extends Context.Service<InboundMessages, InboundMessagesShape>()("app/InboundMessages") {
  static readonly layer = Layer.effect(
    InboundMessages,
    Effect.gen(function*() {
      const db = yield* Database

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

      const withContent = (row: InboundMessageRow) =>
        Effect.gen(function*() {
          const parts = row.mime_id === null ? [] : yield* db.query<AttachmentMeta & { content: Uint8Array }>(
            "SELECT filename, content_type, content_id, size, content FROM inbound_attachments WHERE mime_id = $1 ORDER BY position",
            [row.mime_id],
          )
          return toInboundMessage(row, {
            attachments: parts.map((p) => ({
              filename: p.filename,
              content_type: p.content_type,
              size: p.size,
              content_id: p.content_id,
              content: toBase64(p.content),
            })),
          })
        })

      const list = Effect.fn("InboundMessages.list")(function*(userId: number, q: ListMessages) {
        const [address] = yield* db.query<{ user_id: number; message_count: number; unread_count: number }>(
          "SELECT user_id, message_count, unread_count FROM inbound_addresses WHERE id = $1",
          [q.addressId],
        )
        if (!address) return yield* new NotFound({ message: "inbound address not found" })
        if (address.user_id !== userId) return yield* new Forbidden({ message: "this address belongs to another account" })
        const total = Math.max(0, q.unreadOnly ? address.unread_count : address.message_count)
        const offset = (q.page - 1) * q.perPage
        // Past the end: nothing to read (and no absurd OFFSET reaches the database).
        if (offset >= total) return { data: [], pagination: pagination(q.page, q.perPage, total) }
        // Newest first as `-id`: only the (address_id, (-id)) indexes yield that order, so the planner
        // cannot pick a backward primary-key scan instead (see 004_inbound.sql).
        const rows = yield* db.query<InboundMessageRow>(
          `SELECT ${MESSAGE_COLUMNS} FROM inbound_messages
            WHERE address_id = $1 ${q.unreadOnly ? "AND NOT is_read" : ""}
            ORDER BY -id LIMIT $2 OFFSET $3`,
          [q.addressId, q.perPage, offset],
        )
        return { data: rows.map((r) => toInboundMessage(r)), pagination: pagination(q.page, q.perPage, total) }
      })

      const get = Effect.fn("InboundMessages.get")(function*(userId: number, id: number) {
        return yield* withContent(yield* owned(userId, id))
      })

      const raw = Effect.fn("InboundMessages.raw")(function*(userId: number, id: number) {
        const row = yield* owned(userId, id)
        const [mime] = row.mime_id === null
          ? []
          : yield* db.query<{ raw: Uint8Array }>("SELECT raw FROM inbound_mime WHERE id = $1", [row.mime_id])
        if (!mime) return yield* notFound()
        return mime.raw
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
