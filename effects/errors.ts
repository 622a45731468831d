/**
 * One tagged error per documented error code (SPEC.md "Codes"), plus the internal ones.
 * Services name exactly these in their error channels; `src/http/errors.ts` maps each tag
 * to its HTTP status and public code in one table, and `src/smtp` maps them to SMTP replies.
 */
import { Schema } from "effect"

/** One entry of the envelope's `errors[]`: `field` is a dotted path (`attachments.2.data_base64`). */
export const FieldIssue = Schema.Struct({
  field: Schema.optional(Schema.String),
  code: Schema.String,
  message: Schema.String,
})
export type FieldIssue = typeof FieldIssue.Type

const withMessage = { message: Schema.String }

/** 400: body, query or a business rule failed; one issue per bad field. */
export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  message: Schema.String,
  issues: Schema.Array(FieldIssue),
}) {
  /** The common case: one field, one reason. */
  static field(field: string, message: string): ValidationError {
    return new ValidationError({ message, issues: [{ field, code: "VALIDATION_ERROR", message }] })
  }
}
/** 400: every recipient of a send is on the account's suppression list. */
export class Suppressed extends Schema.TaggedError<Suppressed>()("Suppressed", withMessage) {}
/** 401: missing, malformed, revoked or expired credentials. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", withMessage) {}
/** 402: the wallet cannot cover the cost. */
export class InsufficientBalance extends Schema.TaggedError<InsufficientBalance>()("InsufficientBalance", {
  message: Schema.String,
  required_tzs: Schema.Number,
  balance_tzs: Schema.Number,
}) {}
/** 403: the account was disabled by an operator. */
export class AccountDisabled extends Schema.TaggedError<AccountDisabled>()("AccountDisabled", withMessage) {}
/** 403: not yours, missing scope, unverified identity or domain, sender not allowed. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", withMessage) {}
/** 404: the resource does not exist. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", withMessage) {}
/** 409: duplicate or conflicting state. */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  message: Schema.String,
  field: Schema.optional(Schema.String),
}) {}
/** 409: a per-account cap was hit. */
export class LimitReached extends Schema.TaggedError<LimitReached>()("LimitReached", withMessage) {}
/**
 * 429: too many requests; `retry_after_seconds` becomes the Retry-After header, and a known
 * bucket (`limit`, `reset_seconds`) the `RateLimit-*` headers.
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  message: Schema.String,
  retry_after_seconds: Schema.Number,
  limit: Schema.optional(Schema.Number),
  reset_seconds: Schema.optional(Schema.Number),
}) {}
/** 502: an upstream provider failed (sends are refunded). `detail` is logged, never returned. */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  message: Schema.String,
  detail: Schema.optional(Schema.String),
}) {}
/** 503: a provider integration is not configured on this server. */
export class NotConfigured extends Schema.TaggedError<NotConfigured>()("NotConfigured", withMessage) {}
/** 200 with success false: DNS has not propagated yet; `data` carries the resource as it stands. */
export class Pending extends Schema.TaggedError<Pending>()("Pending", {
  message: Schema.String,
  data: Schema.Unknown,
}) {}
/** 413: request body above the limit (an HTTP-level code, not in SPEC.md's table). */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", withMessage) {}

/** 500: anything unexpected. `detail` goes to the log only. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  message: Schema.String,
  detail: Schema.optional(Schema.String),
}) {}

/** Every error the HTTP boundary knows how to render. */
export type AppError =
  | ValidationError
  | Suppressed
  | Unauthorized
  | InsufficientBalance
  | AccountDisabled
  | Forbidden
  | NotFound
  | Conflict
  | LimitReached
  | RateLimited
  | ProviderError
  | NotConfigured
  | Pending
  | PayloadTooLarge
  | InternalError
