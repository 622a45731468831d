/**
 * Multi-row statements (the ingest batch commit and its subscribers): one INSERT for many rows,
 * not one round trip per row. Rows become `VALUES ($1::int8, decode($2, 'base64')), (…)`; a value wrapped in
 * `Shared` (a message body that several account copies store) is sent once and referenced by
 * every row that uses it. Bytes travel as base64 text decoded by the server: PGlite takes a
 * bytea parameter at ~2.5 s per 10 MiB, the same bytes as base64 text in ~0.2 s (git eb768ff).
 */

/** How a column's parameter is written: a cast, or `base64` for bytes sent as base64 text. */
export type Column = "int8" | "int4" | "text" | "jsonb" | "timestamptz" | "bool" | "base64"

/** A (large) value sent once per statement however many rows use it. */
export class Shared<A> {
  readonly value: A
  constructor(value: A) {
    this.value = value
  }
}

const placeholder = (column: Column, n: number) => (column === "base64" ? `decode($${n}, 'base64')` : `$${n}::${column}`)

/** PostgreSQL takes at most 65,535 parameters per statement; stay well below. */
const MAX_PARAMS = 20_000

export interface Values {
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
}

/**
 * `VALUES` lists for `rows` (`columns` says how each cell is sent), split below the parameter
 * limit. Each statement's parameters start with `leading` ($1 … $k), for the rest of its SQL.
 */
export const valuesLists = (
  columns: ReadonlyArray<Column>,
  rows: ReadonlyArray<ReadonlyArray<unknown>>,
  leading: ReadonlyArray<unknown> = [],
): Array<Values> => {
  const out: Array<Values> = []
  let lines: Array<string> = []
  let params: Array<unknown> = [...leading]
  let shared = new Map<Shared<unknown>, number>()
  const flush = () => {
    if (lines.length > 0) out.push({ sql: `VALUES ${lines.join(", ")}`, params })
    lines = []
    params = [...leading]
    shared = new Map()
  }
  for (const row of rows) {
    if (params.length + columns.length > MAX_PARAMS) flush()
    const cells = columns.map((column, i) => {
      const value = row[i]
      if (value instanceof Shared) {
        const seen = shared.get(value)
        if (seen !== undefined) return placeholder(column, seen)
        params.push(value.value)
        shared.set(value, params.length)
        return placeholder(column, params.length)
      }
      params.push(value)
      return placeholder(column, params.length)
    })
    lines.push(`(${cells.join(", ")})`)
  }
  flush()
  return out
}

/** `$start, $start+1, …` for an `IN (…)` list of `n` values cast to `cast`. */
export const inList = (n: number, cast: Column, start = 1): string =>
  Array.from({ length: n }, (_, i) => placeholder(cast, start + i)).join(", ")
