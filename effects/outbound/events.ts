/**
 * The outbound events (DECISIONS.md "Bounces, complaints and outbound events") as they are
 * written: `email.sent` / `email.failed` where dispatch records what the relay answered for each
 * recipient, `email.bounced` / `email.deferred` / `email.complained` where a bounce or complaint
 * is processed (effects/bounces). Delivery to the account's endpoints is the webhook machinery's.
 */
import type { OutboundEvent } from "../webhooks/endpoint-schema.ts"

/** An RFC 3463 enhanced status code inside a reply or diagnostic (`550 5.1.1 …` → `5.1.1`). */
export const ENHANCED_CODE = /(?<![\d.])([245]\.\d{1,3}\.\d{1,3})(?![\d.])/

/**
 * The status a reply reports: its enhanced code when it carries one, else the basic reply code
 * (`550`), else null.
 */
export const smtpStatus = (text: string | null | undefined, code: number | null | undefined): string | null =>
  ENHANCED_CODE.exec(text ?? "")?.[1] ?? (code != null ? String(code) : null)

/** What the relay answered for one recipient, as `email.sent` or `email.failed`. */
export const dispatchEvent = (emailId: number, o: {
  readonly email: string
  readonly sent: boolean
  readonly code: number | null
  readonly response: string | null
}): OutboundEvent => ({
  event: o.sent ? "email.sent" : "email.failed",
  email_id: emailId,
  recipient: o.email,
  status: o.sent ? "sent" : "failed",
  smtp_code: smtpStatus(o.response, o.code),
  diagnostic: o.response,
})
