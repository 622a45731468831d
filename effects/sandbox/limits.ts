/**
 * Sandbox limits (SPEC.md "Limits": 2,000 captured messages per month). A Reference, so a test
 * provides a small cap instead of sending 2,000 messages.
 *
 * The month is the calendar month in UTC: the allowance renews at 00:00 UTC on the 1st
 * (03:00 in Dar es Salaam).
 */
import { Context } from "effect"

export interface SandboxLimits {
  /** Messages one account may have captured per calendar month. */
  readonly monthlyCaptures: number
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = { monthlyCaptures: 2_000 }

export const SandboxLimits = Context.Reference<SandboxLimits>("app/SandboxLimits", {
  defaultValue: () => DEFAULT_SANDBOX_LIMITS,
})

/** `YYYY-MM` of `at` (UTC). */
export const monthLabel = (at: Date): string => at.toISOString().slice(0, 7)
