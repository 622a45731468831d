/**
 * Field schemas shared by several capabilities, so a rule (what a phone number is, how paging
 * works) is written once and reads the same in every route, error and OpenAPI document.
 */
import { Schema } from "effect"

const msg = (message: string) => ({ message })

/**
 * The one text rule for every string taken over HTTP (DECISIONS.md "Hostile input"). PostgreSQL
 * refuses NUL in text and jsonb, a lone surrogate cannot be encoded as UTF-8, and the other C0
 * controls break headers, logs and terminals: refused at the edge with the field's path instead
 * of failing deep inside a query as a 500. TAB, CR and LF are allowed in multi-line text only.
 */
const C0_ANY = /[\u0000-\u001f]/
const C0_BUT_LINE_BREAKS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/

const LINE_BREAK = /[\r\n]/

/** What is wrong with `s` under a rule, if anything. */
const textProblem = (controls: RegExp, what: string) => (s: string): string | undefined =>
  controls.test(s)
    ? (controls === C0_ANY && LINE_BREAK.test(s) ? "must be a single line (no line breaks)" : `must not contain ${what}`)
    : s.isWellFormed()
    ? undefined
    : "must not contain lone surrogates (invalid Unicode)"

const singleLineProblem = textProblem(C0_ANY, "control characters")
const multilineProblem = textProblem(C0_BUT_LINE_BREAKS, "control characters other than tab, CR and LF")

// Lone surrogates cannot be written as a JSON Schema pattern, hence "approximate".
const documented = (pattern: string) => ({ toJsonSchema: () => [{ pattern }, true] as const })

/*
 * Both filters abort: a string that breaks the text rule is reported once, by this rule, and the
 * field's own checks (pattern, length) do not add a second entry for the same field.
 */

/** A single line of text: no C0 control characters (TAB, CR and LF included), no lone surrogates. */
export const isText = Schema.makeFilter(singleLineProblem, documented("^[^\\u0000-\\u001f]*$"), true)
/** Text that may span lines: TAB, CR and LF allowed; other C0 controls and lone surrogates refused. */
export const isMultilineText = Schema.makeFilter(multilineProblem, documented("^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f]*$"), true)

/** Every single-line string field taken over HTTP starts here (`Text.check(...)` adds its own rules). */
export const Text = Schema.String.check(isText)
/** A Subject is one header line (RFC 5322): this many characters at most, as written or rendered. */
export const MAX_SUBJECT_CHARS = 998
/** Bodies, templates, persona, notes: where line breaks and tabs belong. */
export const MultilineText = Schema.String.check(isMultilineText)

/**
 * A string map (template variables): values are multi-line text, keys single-line. The keys are
 * checked here because a Record silently drops keys its key schema refuses, and a refused key
 * must be reported like any other bad field.
 */
export const TextMap = Schema.Record(Schema.String, MultilineText).check(
  Schema.makeFilter((map: { readonly [key: string]: string }) =>
    Object.keys(map).flatMap((key) => {
      const problem = singleLineProblem(key)
      return problem === undefined ? [] : [{ path: [key], issue: `key ${problem}` }]
    })
  ),
)

/** A positive integer id taken from a path or query string. */
export const IdFromString = Schema.NumberFromString.check(
  Schema.isInt(msg("Expected a positive integer id")),
  Schema.isGreaterThanOrEqualTo(1, msg("Expected a positive integer id")),
)

/** A positive integer id in a JSON body. */
export const Id = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1, msg("Expected a positive integer id")))

/** Path parameter `{id}`. */
export const IdParams = Schema.Struct({ id: IdFromString })

/**
 * The highest page a list answers (DECISIONS.md "Hostile input"): `(page - 1) * per_page` then
 * stays far inside an integer, so no OFFSET can overflow into a database error.
 */
export const MAX_PAGE = 1_000_000
const pageMessage = msg(`page must be an integer from 1 to ${MAX_PAGE}`)

/** `page` 1..1,000,000 and `per_page` 1..100, both optional (defaults 1 and 20). */
export const PageQuery = Schema.Struct({
  page: Schema.optional(
    Schema.NumberFromString.check(Schema.isInt(pageMessage), Schema.isBetween({ minimum: 1, maximum: MAX_PAGE }, pageMessage)),
  ),
  per_page: Schema.optional(
    Schema.NumberFromString.check(
      Schema.isInt(msg("per_page must be an integer from 1 to 100")),
      Schema.isBetween({ minimum: 1, maximum: 100 }, msg("per_page must be an integer from 1 to 100")),
    ),
  ),
})
export type PageQuery = typeof PageQuery.Type

export interface Pagination {
  readonly page: number
  readonly per_page: number
  readonly total: number
  readonly total_pages: number
}

export const paging = (q: { page?: number | undefined; per_page?: number | undefined }) => {
  const page = q.page ?? 1
  const perPage = q.per_page ?? 20
  return { page, perPage, offset: (page - 1) * perPage }
}

export const pagination = (page: number, perPage: number, total: number): Pagination => ({
  page,
  per_page: perPage,
  total,
  total_pages: Math.ceil(total / perPage),
})

/** A pragmatic addr-spec: one @, no spaces, a dotted domain; at most 254 characters. */
export const EMAIL_PATTERN = /^[^\s@<>(),;:"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/
export const Email = Text.check(
  Schema.isMaxLength(254, msg("Expected an email address of at most 254 characters")),
  Schema.isPattern(EMAIL_PATTERN, msg("Expected an email address")),
)

/** Tanzanian mobile numbers: `+255` or `0`, then 6 or 7, then 8 digits (SPEC.md rule 5). */
export const TZ_PHONE_PATTERN = /^(?:\+255|0)[67]\d{8}$/
export const TzPhone = Text.check(
  Schema.isPattern(TZ_PHONE_PATTERN, msg("Expected a Tanzanian phone number: +255 or 0, then 6 or 7, then 8 digits")),
)
/** `0712345678` → `+255712345678`; already normalized numbers pass through. */
export const normalizeTzPhone = (phone: string): string => (phone.startsWith("0") ? `+255${phone.slice(1)}` : phone)

/** Address and sender local parts: 1..64 of `[a-z0-9-]`. */
export const LocalPart = Text.check(
  Schema.isPattern(/^[a-z0-9-]{1,64}$/, msg("Expected 1 to 64 characters of lowercase a-z, 0-9 and -")),
)

/** A non-empty string with an upper bound (names, labels, subjects). */
export const BoundedString = (max: number, what = "value") =>
  Text.check(
    Schema.isMinLength(1, msg(`${what} must not be empty`)),
    Schema.isMaxLength(max, msg(`${what} must be at most ${max} characters`)),
  )

/** Dates as they leave the API: RFC 3339 UTC with `Z`. */
export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null)
