/**
 * List pages in bounded memory. A page's items are the resource itself, bodies included
 * (SPEC.md), and `per_page` goes to 100: 100 inbound messages of 25 MB each would make one GET
 * build a ~2.5 GB answer, and 5 messages of 10 MB measured +180 MiB of RSS for one request
 * (bench/REPORT.md). So a page's statement brings the bodies of light rows only (up to
 * INLINE_BODY_BYTES each, most mail); the bodies of heavy rows stay in the database until the
 * answer reaches them, and are then fetched a group at a time, each group at most
 * CHUNK_BODY_BYTES of bodies (or one row larger than that). The app writes each group out before
 * the next is fetched, at the pace the client reads (src/http/app.ts, `Reply.more`).
 */
import { Effect } from "effect"
import type { DatabaseShape } from "../ports/Database.ts"

/** A row's bodies (text and HTML together, bytes as stored) come with its page up to this size. */
export const INLINE_BODY_BYTES = 64 * 1024

/** Bodies fetched for one group of heavy rows at most (a row larger than this is a group alone). */
export const CHUNK_BODY_BYTES = 4 * 1024 * 1024

/** A page's row as its statement gave it: `body_bytes` always, the bodies only when light. */
export interface PageRow {
  readonly id: number
  /** Its bodies' bytes, text and HTML together. */
  readonly body_bytes: number
}

/**
 * A page statement's body columns: `text_body` and `html_body` of a light row (NULL for a heavy
 * one, whose bodies stay unread in the database), and `body_bytes`. `text` and `html` are the
 * columns as the statement names them; `elsewhere`, an expression of the bytes of its bodies kept
 * outside the row (a text in its message's file: effects/messages/blob-text.ts).
 */
export const pageBodyColumns = (text = "text_body", html = "html_body", elsewhere = "0"): string => {
  const size = `octet_length(${text}) + octet_length(${html}) + ${elsewhere}`
  const light = `${size} <= ${INLINE_BODY_BYTES}`
  return `CASE WHEN ${light} THEN ${text} END AS text_body, CASE WHEN ${light} THEN ${html} END AS html_body, ${size} AS body_bytes`
}

/** Rows of a body statement (`id`, `text_body`, `html_body`) by id. */
export const byId = <B extends { readonly id: number }>(rows: ReadonlyArray<B>): ReadonlyMap<number, B> => new Map(rows.map((b) => [Number(b.id), b]))

/**
 * The bodies of `table`'s rows among `ids` that belong to `userId`, as rows (`byId` keys them; a
 * table with `text_body` and `html_body`; `more`: further columns to read with them).
 */
export const bodiesIn = (db: DatabaseShape, table: "inbound_messages" | "sandbox_messages", userId: number, more = "") =>
<B extends { readonly id: number; readonly text_body: string; readonly html_body: string }>(ids: ReadonlyArray<number>) =>
  db.query<B>(`SELECT id, text_body, html_body${more ? `, ${more}` : ""} FROM ${table} WHERE id = ANY($1::bigint[]) AND user_id = $2`, [
    ids.map(String),
    userId,
  ])

/** A heavy row is one whose bodies its page's statement left out. */
export const isHeavy = (row: PageRow, inline = INLINE_BODY_BYTES): boolean => Number(row.body_bytes) > inline

/**
 * The page's rows in consecutive groups, in order: each group's heavy rows add up to at most
 * `budget` bytes of bodies, or it holds one heavy row larger than that. Light rows go with the
 * group they fall in.
 */
export const groupsOf = <R extends PageRow>(rows: ReadonlyArray<R>, budget = CHUNK_BODY_BYTES, inline = INLINE_BODY_BYTES): Array<Array<R>> => {
  const groups: Array<Array<R>> = [[]]
  let bytes = 0
  for (const row of rows) {
    if (isHeavy(row, inline)) {
      const size = Number(row.body_bytes)
      if (bytes > 0 && bytes + size > budget) {
        groups.push([])
        bytes = 0
      }
      bytes += size
    }
    groups[groups.length - 1]!.push(row)
  }
  return groups.filter((g) => g.length > 0)
}

/** A page as the app answers it: the items at hand, then the rest one group at a time. */
export interface HeavyPage<Item, E, R> {
  readonly data: ReadonlyArray<Item>
  /** Further items, in order, each group fetched only when the one before it was written out. */
  readonly more: ReadonlyArray<Effect.Effect<ReadonlyArray<Item>, E, R>>
}

/**
 * `rows` (a page, in order) as items: light rows at once, heavy rows' bodies fetched by
 * `bodies` (keyed by row id) group by group. A heavy row whose bodies are gone by then (deleted
 * meanwhile) is left out of the answer, as a row deleted before the page was read would be.
 */
export const heavyPage = <R extends PageRow, B, Item, E, Req>(
  rows: ReadonlyArray<R>,
  bodies: (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyMap<number, B>, E, Req>,
  toItem: (row: R, bodies: B | undefined) => Item,
  options: { readonly budget?: number; readonly inline?: number } = {},
): HeavyPage<Item, E, Req> => {
  const inline = options.inline ?? INLINE_BODY_BYTES
  if (!rows.some((r) => isHeavy(r, inline))) return { data: rows.map((r) => toItem(r, undefined)), more: [] }
  return {
    data: [],
    more: groupsOf(rows, options.budget ?? CHUNK_BODY_BYTES, inline).map((group) =>
      Effect.map(bodies(group.filter((r) => isHeavy(r, inline)).map((r) => Number(r.id))), (found) =>
        group.flatMap((r) => {
          if (!isHeavy(r, inline)) return [toItem(r, undefined)]
          const b = found.get(Number(r.id))
          return b === undefined ? [] : [toItem(r, b)]
        }))
    ),
  }
}
