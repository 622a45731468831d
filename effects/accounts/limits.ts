/**
 * Rate limits of the authentication endpoints (DECISIONS.md: per IP and per identifier).
 * Per-IP limits are generous because mobile carriers put many people behind one address
 * (CGNAT), and one integration or CI run registers and verifies many accounts from one host;
 * per-identifier and per-account limits are the tight ones. Sign-in counts tries per identifier,
 * and a successful sign-in clears that count (test/acceptance/accounts.test.ts). Verification sends are
 * limited per account and per destination, so the service cannot be used to spam a phone or
 * inbox (SMS costs money). A Reference, so a test can provide other numbers explicitly.
 */
import { Context } from "effect"
import type { RateLimit } from "../ratelimit/service.ts"

export interface AuthRateLimits {
  readonly loginPerIdentifier: RateLimit
  readonly loginPerIp: RateLimit
  readonly registerPerIp: RateLimit
  readonly googlePerIp: RateLimit
  readonly refreshPerIp: RateLimit
  /** Email-link checks (the token is unguessable; this bounds abuse of the endpoint). */
  readonly emailVerifyPerIp: RateLimit
  /** OTP checks per account, on top of the 5 tries each code allows. */
  readonly phoneVerifyPerAccount: RateLimit
  /** Links and codes sent (set, change, resend) per account and per destination. */
  readonly sendsPerAccount: RateLimit
  readonly sendsPerDestination: RateLimit
}

export const DEFAULT_AUTH_RATE_LIMITS: AuthRateLimits = {
  loginPerIdentifier: { limit: 10, window: "15 minutes" },
  loginPerIp: { limit: 1000, window: "15 minutes" },
  registerPerIp: { limit: 1000, window: "1 hour" },
  googlePerIp: { limit: 100, window: "15 minutes" },
  refreshPerIp: { limit: 300, window: "15 minutes" },
  emailVerifyPerIp: { limit: 1000, window: "15 minutes" },
  phoneVerifyPerAccount: { limit: 10, window: "15 minutes" },
  sendsPerAccount: { limit: 5, window: "1 hour" },
  sendsPerDestination: { limit: 5, window: "1 hour" },
}

export const AuthRateLimits = Context.Reference<AuthRateLimits>("app/AuthRateLimits", {
  defaultValue: () => DEFAULT_AUTH_RATE_LIMITS,
})
