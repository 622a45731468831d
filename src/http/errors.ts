/**
 * The one table from error tag to HTTP status and public code. Declared errors keep their
 * message; anything else (a DbError, a defect) becomes 500 INTERNAL_ERROR with a fixed message,
 * and its detail goes to the log only.
 */
import { Cause } from "effect"
import type { AppError, FieldIssue } from "../../effects/errors.ts"

export interface Rendered {
  readonly status: number
  readonly code: string
  readonly message: string
  readonly errors: ReadonlyArray<FieldIssue>
  readonly headers: Record<string, string>
  /** Pending answers 200 with `data`; others have none. */
  readonly data?: unknown
  /** For the log: what really happened, never sent to the client. */
  readonly internal?: unknown
}

export const ERROR_TABLE: Record<AppError["_tag"], { status: number; code: string }> = {
  ValidationError: { status: 400, code: "VALIDATION_ERROR" },
  Suppressed: { status: 400, code: "SUPPRESSED" },
  Unauthorized: { status: 401, code: "UNAUTHORIZED" },
  InsufficientBalance: { status: 402, code: "INSUFFICIENT_BALANCE" },
  AccountDisabled: { status: 403, code: "ACCOUNT_DISABLED" },
  Forbidden: { status: 403, code: "FORBIDDEN" },
  NotFound: { status: 404, code: "NOT_FOUND" },
  Conflict: { status: 409, code: "CONFLICT" },
  LimitReached: { status: 409, code: "LIMIT_REACHED" },
  PayloadTooLarge: { status: 413, code: "PAYLOAD_TOO_LARGE" },
  RateLimited: { status: 429, code: "RATE_LIMITED" },
  ProviderError: { status: 502, code: "PROVIDER_ERROR" },
  NotConfigured: { status: 503, code: "NOT_CONFIGURED" },
  Pending: { status: 200, code: "PENDING" },
  InternalError: { status: 500, code: "INTERNAL_ERROR" },
}

const INTERNAL = { status: 500, code: "INTERNAL_ERROR", message: "internal error" }

const isAppError = (e: unknown): e is AppError =>
  typeof e === "object" && e !== null && "_tag" in e && (e as { _tag: string })._tag in ERROR_TABLE

/** Renders a declared error; unknown tags are internal. */
export const renderError = (e: unknown): Rendered => {
  if (!isAppError(e)) return { ...INTERNAL, errors: [{ code: INTERNAL.code, message: INTERNAL.message }], headers: {}, internal: e }
  const { status, code } = ERROR_TABLE[e._tag]
  const headers: Record<string, string> = {}
  switch (e._tag) {
    case "ValidationError":
      return { status, code, message: e.message, errors: e.issues.length ? e.issues : [{ code, message: e.message }], headers }
    case "Conflict":
      return { status, code, message: e.message, errors: [{ ...(e.field ? { field: e.field } : {}), code, message: e.message }], headers }
    case "RateLimited":
      headers["Retry-After"] = String(Math.max(1, Math.ceil(e.retry_after_seconds)))
      if (e.limit !== undefined) {
        headers["RateLimit-Limit"] = String(e.limit)
        headers["RateLimit-Remaining"] = "0"
        headers["RateLimit-Reset"] = String(Math.max(1, Math.ceil(e.reset_seconds ?? e.retry_after_seconds)))
      }
      break
    case "Pending":
      return { status, code, message: e.message, errors: [{ code, message: e.message }], headers, data: e.data }
    case "InternalError":
    case "ProviderError":
      return {
        status,
        code,
        message: e._tag === "InternalError" ? INTERNAL.message : e.message,
        errors: [{ code, message: e._tag === "InternalError" ? INTERNAL.message : e.message }],
        headers,
        internal: e,
      }
  }
  return { status, code, message: e.message, errors: [{ code, message: e.message }], headers }
}

/** Renders the failure of a handler's Exit: the first declared error, else an internal error. */
export const renderCause = (cause: Cause.Cause<unknown>): Rendered => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure) return renderError(failure.error)
  return { ...INTERNAL, errors: [{ code: INTERNAL.code, message: INTERNAL.message }], headers: {}, internal: Cause.pretty(cause) }
}
