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

/**
 * Message bytes handed to the provider at once, across the process (sends, batches and the
 * recovery worker): each dispatch holds about its composed size (`dispatchBytes`) while the
 * provider takes it, and one larger than this holds all of it. Composing and storing or relaying
 * a message holds several copies of it, so a batch of large messages sent ten at a time grew the
 * process by ~1.2 GB (30 recipients, 18 MiB of attachments, PostgreSQL; ~1.5 GB on PGlite), and
 * two such requests twice that. Small mail is not held back: 32 MiB is thousands of them.
 */
export const DISPATCH_BUDGET_BYTES = 32 * 1024 * 1024

/** 2 send calls per second per account, burst 2, shared by /emails and /emails/batch. */
export const DEFAULT_OUTBOUND_RATE_LIMIT: RateLimit = { limit: 2, window: "1 second", burst: 2 }

export const OutboundRateLimit = Context.Reference<RateLimit>("app/OutboundRateLimit", {
  defaultValue: () => DEFAULT_OUTBOUND_RATE_LIMIT,
})

export const rateLimitKey = (userId: number) => `outbound:${userId}`
