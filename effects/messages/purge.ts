/**
 * Deleting inbound messages, shared by address deletion and the retention worker. One statement
 * deletes the chosen messages and keeps the counters in step (the address's message/unread
 * counts, the MIME row's reference count); a second drops MIME rows nothing refers to any more,
 * with their attachments (ON DELETE CASCADE).
 */
import { Effect } from "effect"
import { Database } from "../ports/Database.ts"

/**
 * `chosen` is a SQL expression yielding message ids (it may use `$1`, `$2` … from `params`).
 * Returns how many messages were deleted.
 */
export const purgeMessages = (chosen: string, params: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const db = yield* Database
    return yield* db.transaction(Effect.gen(function*() {
      const [row] = yield* db.query<{ deleted: number }>(
        `WITH gone AS (
           DELETE FROM inbound_messages WHERE id IN (${chosen})
           RETURNING address_id, mime_id, is_read
         ), per_address AS (
           UPDATE inbound_addresses a
              SET message_count = a.message_count - g.n, unread_count = a.unread_count - g.u
             FROM (SELECT address_id, count(*) AS n, count(*) FILTER (WHERE NOT is_read) AS u FROM gone GROUP BY address_id) g
            WHERE a.id = g.address_id
           RETURNING a.id
         ), per_mime AS (
           UPDATE inbound_mime m SET message_refs = m.message_refs - g.n
             FROM (SELECT mime_id, count(*) AS n FROM gone WHERE mime_id IS NOT NULL GROUP BY mime_id) g
            WHERE m.id = g.mime_id
           RETURNING m.id
         )
         SELECT count(*)::int8 AS deleted FROM gone`,
        params,
      )
      yield* db.query("DELETE FROM inbound_mime WHERE message_refs <= 0")
      return row?.deleted ?? 0
    }))
  })
