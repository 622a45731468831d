/**
 * The listings' one page query: a table's rows for `column = value`, newest first (by id), and
 * how many there are in all (the pagination's total).
 */
import { Effect, type Schema } from "effect"
import { type DatabaseShape, type DbError, queryAs, type Row } from "../ports/Database.ts"

/** Which rows of a listing: from `?page` and `?per_page` (effects/shared/schema.ts `paging`). */
export interface Page {
  readonly limit: number
  readonly offset: number
}

export interface PageOf<T> {
  readonly rows: ReadonlyArray<T>
  readonly total: number
}

const statements = (table: string, column: string) => ({
  rows: `SELECT * FROM ${table} WHERE ${column} = $1 ORDER BY id DESC LIMIT $2 OFFSET $3`,
  count: `SELECT count(*)::int8 AS n FROM ${table} WHERE ${column} = $1`,
})

/** Rows decoded with `schema` (where money is listed); without one, typed as the caller says. */
export function newestFirst<S extends Schema.Decoder<unknown>>(
  db: DatabaseShape,
  table: string,
  column: string,
  schema: S,
): (value: unknown, page: Page) => Effect.Effect<PageOf<S["Type"]>, DbError>
export function newestFirst<T = Row>(db: DatabaseShape, table: string, column: string): (value: unknown, page: Page) => Effect.Effect<PageOf<T>, DbError>
export function newestFirst(db: DatabaseShape, table: string, column: string, schema?: Schema.Decoder<unknown>) {
  const sql = statements(table, column)
  return (value: unknown, page: Page) =>
    Effect.gen(function*() {
      const params = [value, page.limit, page.offset]
      const rows = schema ? yield* queryAs(db, schema, sql.rows, params) : yield* db.query(sql.rows, params)
      const [count] = yield* db.query<{ n: number }>(sql.count, [value])
      return { rows, total: count?.n ?? 0 }
    })
}
