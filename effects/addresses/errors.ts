/**
 * Why an envelope recipient is refused. These are SMTP-side outcomes (src/smtp maps them to
 * replies), not HTTP errors, so they live with routing rather than in effects/errors.ts.
 */
import { Schema } from "effect"

/** No such mailbox: 550 5.1.1. */
export class UnknownRecipient extends Schema.TaggedError<UnknownRecipient>()("UnknownRecipient", {
  address: Schema.String,
}) {}

/** The address's receiving domain lost its DNS records: 451 4.4.3, the sender retries later. */
export class DomainSuspended extends Schema.TaggedError<DomainSuspended>()("DomainSuspended", {
  address: Schema.String,
  domain: Schema.String,
}) {}
