/**
 * Deleting inbound messages, shared by address deletion and the retention worker. One statement
 * deletes the chosen messages and keeps the counters in step (the address's message/unread
 * counts, the MIME row's reference count); a second drops MIME rows nothing refers to any more,
 * with their attachments (ON DELETE CASCADE).
 *
 * Lock order: the shared rows are taken in one global order before they change, the order ingest
 * uses (messages, then addresses by id, then MIME rows by id; wallets come last in ingest).
 * Updated through a join, they would be locked in whatever order the plan produced, and a purge
 * and a delivery to the same addresses could each hold a row the other waits for: a deadlock
 * PostgreSQL breaks by failing one of them.
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
      const messages = yield* db.query<{ id: number; address_id: number; mime_id: number | null }>(
        `SELECT id, address_id, mime_id FROM inbound_messages WHERE id IN (${chosen}) ORDER BY id FOR UPDATE`,
        params,
      )
      if (messages.length === 0) return 0
      const ids = (values: ReadonlyArray<number | null>) => [...new Set(values.filter((v) => v !== null).map(String))]
      yield* db.query("SELECT id FROM inbound_addresses WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE", [
        ids(messages.map((m) => m.address_id)),
      ])
      yield* db.query("SELECT id FROM inbound_mime WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE", [
        ids(messages.map((m) => m.mime_id)),
      ])
      const [row] = yield* db.query<{ deleted: number }>(
        `WITH gone AS (
           DELETE FROM inbound_messages WHERE id = ANY($1::bigint[])
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
        [ids(messages.map((m) => m.id))],
      )
      // A MIME row no copy refers to; the second condition is the check a foreign key made
      // before migration 041 (a count gone wrong must never take a stored message's bytes).
      yield* db.query(
        "DELETE FROM inbound_mime m WHERE m.message_refs <= 0 AND NOT EXISTS (SELECT 1 FROM inbound_messages c WHERE c.mime_id = m.id)",
      )
      return row?.deleted ?? 0
    }))
  })
