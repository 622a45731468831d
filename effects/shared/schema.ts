/**
 * Field schemas shared by several capabilities, so a rule (what a phone number is, how paging
 * works) is written once and reads the same in every route, error and OpenAPI document.
 */
import { Schema } from "effect"

const msg = (message: string) => ({ message })

/** A positive integer id taken from a path or query string. */
export const IdFromString = Schema.NumberFromString.check(
  Schema.isInt(msg("Expected a positive integer id")),
  Schema.isGreaterThanOrEqualTo(1, msg("Expected a positive integer id")),
)

/** A positive integer id in a JSON body. */
export const Id = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1, msg("Expected a positive integer id")))

/** Path parameter `{id}`. */
export const IdParams = Schema.Struct({ id: IdFromString })

/** `page` >= 1 and `per_page` 1..100, both optional (defaults 1 and 20). */
export const PageQuery = Schema.Struct({
  page: Schema.optional(
    Schema.NumberFromString.check(Schema.isInt(msg("page must be an integer >= 1")), Schema.isGreaterThanOrEqualTo(1, msg("page must be an integer >= 1"))),
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
export const Email = Schema.String.check(
  Schema.isMaxLength(254, msg("Expected an email address of at most 254 characters")),
  Schema.isPattern(EMAIL_PATTERN, msg("Expected an email address")),
)

/** Tanzanian mobile numbers: `+255` or `0`, then 6 or 7, then 8 digits (SPEC.md rule 5). */
export const TZ_PHONE_PATTERN = /^(?:\+255|0)[67]\d{8}$/
export const TzPhone = Schema.String.check(
  Schema.isPattern(TZ_PHONE_PATTERN, msg("Expected a Tanzanian phone number: +255 or 0, then 6 or 7, then 8 digits")),
)
/** `0712345678` → `+255712345678`; already normalized numbers pass through. */
export const normalizeTzPhone = (phone: string): string => (phone.startsWith("0") ? `+255${phone.slice(1)}` : phone)

/** Address and sender local parts: 1..64 of `[a-z0-9-]`. */
export const LocalPart = Schema.String.check(
  Schema.isPattern(/^[a-z0-9-]{1,64}$/, msg("Expected 1 to 64 characters of lowercase a-z, 0-9 and -")),
)

/** A non-empty string with an upper bound (names, labels, subjects). */
export const BoundedString = (max: number, what = "value") =>
  Schema.String.check(
    Schema.isMinLength(1, msg(`${what} must not be empty`)),
    Schema.isMaxLength(max, msg(`${what} must be at most ${max} characters`)),
  )

/** Dates as they leave the API: RFC 3339 UTC with `Z`. */
export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null)
