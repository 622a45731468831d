/**
 * The Payment gateway port: asks the gateway to collect money for a top-up. The gateway answers
 * later, out of band, with signed status events at `POST /api/billing/payments/events`
 * (effects/billing/payment-events.ts); this port only starts payments.
 *
 * Adapters: src/providers/payment-http.ts (PAYMENT_API_URL, the DECISIONS.md wire contract) and
 * src/providers/payment-fake.ts (the embedded default: a local checkout page).
 */
import { Context, type Effect } from "effect"
import type { NotConfigured, ProviderError } from "../errors.ts"

export interface CheckoutRequest {
  /** Whole TZS. */
  readonly amount: number
  /** Our reference for the payment; the gateway echoes it on its side. */
  readonly reference: string
  /** After this instant the checkout link no longer takes payments. */
  readonly expiresAt: Date
  /** Where the gateway posts its status events. */
  readonly callbackUrl: string
}

export interface Checkout {
  /** Page where the customer pays by card or mobile money. */
  readonly checkoutUrl: string
  /** A shareable link to the same payment. */
  readonly paymentLinkUrl: string
  /** The gateway's id of the payment; its status events carry it. */
  readonly providerReference: string
}

export interface UssdPushRequest {
  readonly amount: number
  /** Normalized `+255…`. */
  readonly phoneNumber: string
  readonly reference: string
}

export interface UssdPush {
  readonly providerReference: string
}

export type GatewayError = ProviderError | NotConfigured

export interface PaymentGatewayShape {
  /** Creates a hosted checkout (card and mobile money). */
  readonly checkout: (request: CheckoutRequest) => Effect.Effect<Checkout, GatewayError>
  /** Sends a USSD prompt to the phone; the customer confirms with their mobile-money PIN. */
  readonly ussdPush: (request: UssdPushRequest) => Effect.Effect<UssdPush, GatewayError>
}

export class PaymentGateway extends Context.Service<PaymentGateway, PaymentGatewayShape>()("app/PaymentGateway") {}
