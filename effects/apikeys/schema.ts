/** API keys on the wire (DECISIONS.md: model `ApiKey`). */
import { Schema } from "effect"
import { iso, Text } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

/** RFC 3339 date-time with an offset (`2027-01-31T12:00:00Z`), or a date (midnight UTC). */
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2}))?$/

/** Date.parse rolls 2030-02-31 over into March; a real date and time keeps its fields. */
const isRealDate = (s: string): boolean => {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:.(\d{2}):(\d{2})(?::(\d{2}))?)?/.exec(s)
  if (!m) return false
  const [y, mo, d, hh, mi, ss] = m.slice(1).map((x) => Number(x ?? 0)) as [number, number, number, number, number, number]
  const day = new Date(Date.UTC(y, mo - 1, d))
  return day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d && hh < 24 && mi < 60 && ss < 60 &&
    !Number.isNaN(Date.parse(s))
}

export const CreateApiKeyBody = Schema.Struct({
  name: Text.check(
    Schema.isMaxLength(200, msg("must be at most 200 characters")),
    Schema.isPattern(/\S/, msg("must not be empty")),
  ),
  /** `full` (default) or a comma-separated list of scopes; checked by the service. */
  scopes: Schema.optional(Text.check(Schema.isMaxLength(1000, msg("must be at most 1000 characters")))),
  expires_at: Schema.optional(Schema.NullOr(
    Text.check(
      Schema.isPattern(ISO_TIMESTAMP, msg("Expected an ISO 8601 timestamp such as 2027-01-31T12:00:00Z")),
      Schema.makeFilter((s: string) => isRealDate(s) || "Expected a real date and time"),
    ),
  )),
})
export type CreateApiKeyBody = typeof CreateApiKeyBody.Type

export const ApiKey = Schema.Struct({
  id: Schema.Number,
  user_id: Schema.Number,
  name: Schema.String,
  key_prefix: Schema.String,
  scopes: Schema.String,
  last_used_at: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  revoked_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
})
export type ApiKey = typeof ApiKey.Type

/** The creation answer: the only time the plaintext `key` is shown. */
export const CreatedApiKey = Schema.Struct({ api_key: ApiKey, key: Schema.String })
export const ApiKeyData = Schema.Struct({ api_key: ApiKey })

/** An API key as stored (API_KEY_COLUMNS; never the hash), decoded where it is read. */
export const ApiKeyRow = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  name: Schema.String,
  key_prefix: Schema.String,
  scopes: Schema.String,
  last_used_at: Schema.NullOr(Schema.Date),
  expires_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
})
export type ApiKeyRow = typeof ApiKeyRow.Type

export const API_KEY_COLUMNS = "id, user_id, name, key_prefix, scopes, last_used_at, expires_at, revoked_at, created_at"

export const toApiKey = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  user_id: row.user_id,
  name: row.name,
  key_prefix: row.key_prefix,
  scopes: row.scopes,
  last_used_at: iso(row.last_used_at),
  expires_at: iso(row.expires_at),
  revoked_at: iso(row.revoked_at),
  created_at: iso(row.created_at)!,
})
