/**
 * Outbound limits (SPEC.md "Limits", DECISIONS.md "Outbound"). The send rate is a Reference so a
 * test can provide other numbers explicitly, like the auth limits.
 */
import { Context } from "effect"
import type { RateLimit } from "../ratelimit/service.ts"

/** Recipients per send call, to + cc + bcc together. */
export const MAX_RECIPIENTS = 50
/** Recipients per batch call (a bound on one request's work; beyond SPEC.md, see README). */
export const MAX_BATCH_RECIPIENTS = 1000
/** Batch messages handed to the provider per round; each round is recorded before the next starts. */
export const BATCH_CHUNK = 50

/** 2 send calls per second per account, burst 2, shared by /emails and /emails/batch. */
export const DEFAULT_OUTBOUND_RATE_LIMIT: RateLimit = { limit: 2, window: "1 second", burst: 2 }

export const OutboundRateLimit = Context.Reference<RateLimit>("app/OutboundRateLimit", {
  defaultValue: () => DEFAULT_OUTBOUND_RATE_LIMIT,
})

export const rateLimitKey = (userId: number) => `outbound:${userId}`
