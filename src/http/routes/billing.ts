/** Wallet and top-ups (SPEC.md "Billing"), the ledger listing, and the gateway's event endpoint. */
import { Effect, Schema } from "effect"
import { PaymentEvents } from "../../../effects/billing/payment-events.ts"
import {
  BalanceJson,
  CheckoutTopupJson,
  PaymentEventBody,
  PaymentEventResultJson,
  PhoneTopupJson,
  PhoneTopupRequest,
  TopupJson,
  topupJson,
  TopupRequest,
  TransactionJson,
  transactionJson,
} from "../../../effects/billing/schema.ts"
import { Billing } from "../../../effects/billing/service.ts"
import { PAYMENT_EVENTS_PATH, Topups } from "../../../effects/billing/topups.ts"
import { ValidationError } from "../../../effects/errors.ts"
import { IdParams, PageQuery } from "../../../effects/shared/schema.ts"
import { issuesOf } from "../app.ts"
import { ok, paged, route } from "../route.ts"

const tag = "Billing"

/** The event body, decoded only after its signature checked out (an unsigned body learns nothing). */
const decodeEvent = (rawBody: string) =>
  Effect.gen(function*() {
    const json = yield* Effect.try({ try: () => JSON.parse(rawBody) as unknown, catch: () => ValidationError.field("body", "malformed JSON") })
    return yield* Schema.decodeUnknownEffect(PaymentEventBody)(json, { errors: "all" }).pipe(
      Effect.mapError((e) => new ValidationError({ message: "invalid payment event", issues: issuesOf(e.issue) })),
    )
  })

export const billingRoutes = [
  route({
    method: "get",
    path: "/api/billing/balance",
    auth: "key",
    scope: "billing:read",
    tag,
    summary: "Wallet balance in TZS",
    response: BalanceJson,
    handler: ({ principal }) => Billing.use((b) => b.balance(principal.userId)).pipe(Effect.map((balance_tzs) => ok({ balance_tzs }))),
  }),
  route({
    method: "post",
    path: "/api/billing/topup",
    auth: "key",
    scope: "billing:write",
    tag,
    summary: "Start a top-up (card or mobile money) through a checkout link valid 1 hour",
    description: "Minimum 2000 TZS. The wallet is credited when the gateway reports the payment completed.",
    body: TopupRequest,
    response: CheckoutTopupJson,
    status: 201,
    handler: ({ principal, body }) =>
      Topups.use((t) => t.create(principal.userId, body.amount_tzs)).pipe(
        Effect.map(({ topup, checkout }) =>
          ok({
            topup: topupJson(topup),
            checkout_url: checkout.checkoutUrl,
            payment_link_url: checkout.paymentLinkUrl,
            provider_reference: checkout.providerReference,
          }, { message: "top-up created; pay at checkout_url" })
        ),
      ),
  }),
  route({
    method: "post",
    path: "/api/billing/topup/phone",
    auth: "key",
    scope: "billing:write",
    tag,
    summary: "Start a mobile-money top-up by USSD push to the account's verified phone",
    description: "Requires a verified phone (400 VALIDATION_ERROR otherwise); phone_number, if sent, must be that phone.",
    body: PhoneTopupRequest,
    response: PhoneTopupJson,
    status: 201,
    handler: ({ principal, body }) =>
      Topups.use((t) => t.createPhone(principal.userId, body.amount_tzs, body.phone_number)).pipe(
        Effect.map(({ topup, push }) =>
          ok({ topup: topupJson(topup), provider_reference: push.providerReference }, {
            message: "confirm the payment on your phone",
          })
        ),
      ),
  }),
  route({
    method: "get",
    path: "/api/billing/topups",
    auth: "key",
    scope: "billing:read",
    tag,
    summary: "The account's top-ups, newest first",
    query: PageQuery,
    response: Schema.Array(TopupJson),
    handler: ({ principal, query }) =>
      paged(query, (page) => Topups.use((t) => t.list(principal.userId, page)), topupJson),
  }),
  route({
    method: "get",
    path: "/api/billing/topups/:id",
    auth: "key",
    scope: "billing:read",
    tag,
    summary: "One top-up and its status",
    params: IdParams,
    response: TopupJson,
    handler: ({ principal, params }) =>
      Topups.use((t) => t.get(principal.userId, params.id)).pipe(Effect.map((t) => ok(topupJson(t)))),
  }),
  route({
    method: "get",
    path: "/api/billing/transactions",
    auth: "key",
    scope: "billing:read",
    tag,
    summary: "Ledger entries (credits, debits, refunds, adjustments), newest first",
    description: "Every change of the balance; balance_after_tzs is the balance right after the entry.",
    query: PageQuery,
    response: Schema.Array(TransactionJson),
    handler: ({ principal, query }) =>
      paged(query, (page) => Billing.use((b) => b.entries(principal.userId, page)), transactionJson),
  }),
  route({
    method: "post",
    path: PAYMENT_EVENTS_PATH,
    auth: "none",
    tag,
    summary: "Payment gateway status events (for the gateway, not for customers)",
    description:
      "Body {id, event, provider_reference, amount_tzs, occurred_at}; header X-Gateway-Signature = hex HMAC-SHA256 of the raw body " +
      "with PAYMENT_WEBHOOK_SECRET. Idempotent by event id. 401 bad signature; 400 unknown event or amount mismatch; 404 unknown reference.",
    rawBody: true,
    response: PaymentEventResultJson,
    handler: ({ rawBody, header }) =>
      Effect.gen(function*() {
        const events = yield* PaymentEvents
        yield* events.verify(rawBody, header("x-gateway-signature"))
        const event = yield* decodeEvent(rawBody)
        const result = yield* events.receive(event, rawBody)
        return ok({ event_id: result.event_id, outcome: result.outcome, topup: topupJson(result.topup) }, {
          message: result.outcome === "applied" ? "event applied" : `event ${result.outcome}; nothing changed`,
        })
      }),
  }),
]
