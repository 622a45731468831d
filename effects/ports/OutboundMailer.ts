/**
 * Customer mail leaving the platform: one composed message handed to the provider for a set of
 * envelope recipients, with the provider's verdict per recipient. Adapters:
 * src/providers/outbound-relay.ts (SMTP relay via nodemailer, SMTP_RELAY_URL) and
 * src/providers/outbound-capture.ts (the embedded default: kept in a table, never delivered).
 */
import { Context, type Effect, type Option } from "effect"
import type { ProviderError } from "../errors.ts"
import type { DkimKey } from "../sending-domains/identity.ts"

export interface MailAddress {
  readonly email: string
  /** Display name (`Asha <asha@example.co.tz>`), if one was given. */
  readonly name?: string | undefined
}

export interface MailAttachment {
  readonly filename: string
  readonly contentType: string
  readonly content: Uint8Array
}

export interface OutboundDispatch {
  /** Which account and message this is (captures and logs; an HTTP provider would tag with it). */
  readonly userId: number
  readonly messageId: number
  /** Header and envelope sender. */
  readonly from: string
  /** Header recipients; Bcc recipients appear only in `envelope`. */
  readonly to: ReadonlyArray<MailAddress>
  readonly cc: ReadonlyArray<MailAddress>
  /** Who the provider delivers to (after suppression), lowercase-compared with the answer. */
  readonly envelope: ReadonlyArray<string>
  /**
   * The MAIL FROM of each envelope recipient, in the same order: its VERP return path, so a
   * bounce names its recipient. One SMTP transaction per recipient carries it.
   */
  readonly returnPaths: ReadonlyArray<string>
  readonly subject: string
  readonly text?: string | undefined
  readonly html?: string | undefined
  readonly attachments: ReadonlyArray<MailAttachment>
  /** Extra headers (already checked: no CR/LF, no reserved names). */
  readonly headers: Readonly<Record<string, string>>
  /** The Message-ID header, without angle brackets. */
  readonly messageIdHeader: string
  /** Present for verified own domains: sign with it. */
  readonly dkim: Option.Option<DkimKey>
}

export interface RecipientVerdict {
  readonly email: string
  readonly accepted: boolean
  /** The reply code for this recipient (250, 550, 452 …), when the provider gave one. */
  readonly code: number | null
  /** The provider's reply text for this recipient (`550 5.1.1 no such user`), when it gave one. */
  readonly response?: string | null | undefined
  /** The provider's id of this recipient's transaction, when it differs per recipient. */
  readonly providerMessageId?: string | null | undefined
}

export interface DispatchResult {
  /** The provider's id of the message (its own, else our Message-ID). */
  readonly providerMessageId: string
  /** One verdict per envelope recipient. */
  readonly recipients: ReadonlyArray<RecipientVerdict>
}

export interface OutboundMailerShape {
  /**
   * Hands the message over. PROVIDER_ERROR when the message as a whole was not taken
   * (unreachable, refused at MAIL FROM or DATA, connection lost); a message whose recipients
   * were all refused is a result with every verdict `accepted: false`, not an error.
   */
  readonly send: (dispatch: OutboundDispatch) => Effect.Effect<DispatchResult, ProviderError>
  /** `relay` or `capture`, for logs. */
  readonly kind: string
}

export class OutboundMailer extends Context.Service<OutboundMailer, OutboundMailerShape>()("app/OutboundMailer") {}
