/**
 * Mail taken over SMTP is never refused for its content (DECISIONS.md "Hostile input"), but
 * PostgreSQL refuses some of it: NUL in `text` (22021), `\u0000` and lone surrogates in `jsonb`
 * (22P05, 22P02). Every string that goes into a text or JSON column passes through here: NUL is
 * dropped and lone surrogates become U+FFFD. Invalid UTF-8 bytes are already U+FFFD by then
 * (smtp-server and mailparser decode with replacement); the raw MIME keeps the exact bytes.
 */

/** Text PostgreSQL accepts. */
export const pgSafe = (s: string): string => {
  const kept = s.includes("\u0000") ? s.replace(/\u0000/g, "") : s
  return kept.isWellFormed() ? kept : kept.toWellFormed()
}

/** A JSON value whose strings and keys are all `pgSafe` (what `jsonb` accepts). */
export const jsonSafe = (value: unknown): unknown => {
  if (typeof value === "string") return pgSafe(value)
  if (Array.isArray(value)) return value.map(jsonSafe)
  if (value !== null && typeof value === "object" && !(value instanceof Date)) {
    // A Map, then own properties: a key named `__proto__` must stay a key.
    const out = new Map<string, unknown>()
    for (const [k, v] of Object.entries(value)) out.set(pgSafe(k), jsonSafe(v))
    return Object.fromEntries(out)
  }
  return value
}

/** `JSON.stringify` of `jsonSafe(value)`: a parameter a `jsonb` column takes whatever the mail held. */
export const safeJson = (value: unknown): string => JSON.stringify(jsonSafe(value))
