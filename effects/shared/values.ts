/**
 * `IN (…)` lists of typed placeholders. Multi-row statements take their rows as one JSON
 * parameter (`json_to_recordset($n::json) AS r (col type, …)`) instead: one parameter whatever the
 * row count, and a statement text that does not change with it.
 */

/** `$start::cast, $start+1::cast, …` for `n` values. */
export const inList = (n: number, cast: "int8" | "int4" | "text", start = 1): string =>
  Array.from({ length: n }, (_, i) => `$${start + i}::${cast}`).join(", ")
