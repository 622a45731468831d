/**
 * Text messages: the platform's OTP codes (with SMS_API_KEY) and customers' SMS notification
 * rules (with the customer's own provider key, passed per call). Adapters: src/providers/sms.ts
 * (the HTTP contract of DECISIONS.md, or the log when SMS_API_URL is unset).
 */
import { Context, type Effect } from "effect"
import type { NotConfigured, ProviderError } from "../errors.ts"

export interface SmsMessage {
  /** Normalized `+255…` number. */
  readonly to: string
  readonly message: string
}

export interface SmsSendOptions {
  /** The provider key to send with; defaults to the platform's SMS_API_KEY. */
  readonly apiKey?: string
  /** Defaults to SMS_SENDER_ID. */
  readonly senderId?: string
}

export interface SmsReceipt {
  /** The provider's id for the message, when it returned one. */
  readonly messageId: string | null
}

export interface SmsGatewayShape {
  /**
   * Sends one SMS. PROVIDER_ERROR when the provider answers non-2xx or cannot be reached;
   * NOT_CONFIGURED when a provider URL is set but no key is available for the call.
   */
  readonly send: (message: SmsMessage, options?: SmsSendOptions) => Effect.Effect<SmsReceipt, ProviderError | NotConfigured>
}

export class SmsGateway extends Context.Service<SmsGateway, SmsGatewayShape>()("app/SmsGateway") {}
