/**
 * The live payment gateway (PAYMENT_API_URL), per the DECISIONS.md wire contract:
 * `POST {url}/checkout` and `POST {url}/ussd-push`, JSON, `Authorization: Bearer PAYMENT_API_KEY`.
 * fetch comes from the HttpClient service on every call, so tests (msw) and Deno can swap it.
 * The gateway's own words go to `detail` (logged), never to the customer.
 */
import { Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { NotConfigured, ProviderError } from "../../effects/errors.ts"
import { HttpClient, request } from "../../effects/ports/HttpClient.ts"
import { PaymentGateway } from "../../effects/ports/PaymentGateway.ts"

/** A gateway that has not answered in this long is treated as down; the top-up ends failed. */
const TIMEOUT = "15 seconds"

const CheckoutReply = Schema.Struct({
  checkout_url: Schema.String,
  // Some gateways only return one link; the checkout page then doubles as the payment link.
  payment_link_url: Schema.optional(Schema.NullOr(Schema.String)),
  reference: Schema.String.check(Schema.isMinLength(1)),
})

const UssdPushReply = Schema.Struct({
  reference: Schema.String.check(Schema.isMinLength(1)),
})

const failed = (detail: string) => new ProviderError({ message: "the payment gateway could not start the payment; try again", detail })

export const paymentGatewayHttpLayer = Layer.effect(
  PaymentGateway,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const http = yield* HttpClient

    const post = <S extends Schema.Codec<unknown, unknown>>(path: string, body: unknown, reply: S) =>
      Effect.gen(function*() {
        if (Option.isNone(config.paymentApiUrl) || Option.isNone(config.paymentApiKey)) {
          return yield* new NotConfigured({ message: "the payment gateway is not configured (PAYMENT_API_URL, PAYMENT_API_KEY)" })
        }
        const url = `${config.paymentApiUrl.value.replace(/\/+$/, "")}${path}`
        const key = config.paymentApiKey.value
        // One deadline from the lookup to the end of the reply, its body capped (the HttpClient port).
        const res = yield* request(url, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json", authorization: `Bearer ${key}` },
          body: JSON.stringify(body),
        }, TIMEOUT).pipe(
          Effect.provideService(HttpClient, http),
          Effect.mapError((e) => failed(e.reason === "timeout" ? `POST ${path}: no answer within ${TIMEOUT}` : `POST ${path}: ${e.detail}`)),
        )
        const text = res.text
        if (!res.ok) return yield* failed(`POST ${path}: HTTP ${res.status}: ${text.slice(0, 500)}`)
        if (!res.complete) return yield* failed(`POST ${path}: the reply was cut short (over 1 MiB, or still arriving at the deadline)`)
        const json = yield* Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => failed(`POST ${path}: reply is not JSON`) })
        return yield* Schema.decodeUnknownEffect(reply)(json).pipe(
          Effect.mapError((e) => failed(`POST ${path}: unexpected reply: ${e.message}`)),
        )
      }).pipe(
        Effect.timeoutOrElse({ duration: TIMEOUT, orElse: () => Effect.fail(failed(`POST ${path}: no answer within ${TIMEOUT}`)) }),
        Effect.withSpan(`PaymentGateway.http ${path}`),
      )

    return PaymentGateway.of({
      checkout: (r) =>
        post("/checkout", {
          amount: r.amount,
          currency: "TZS",
          reference: r.reference,
          expires_at: r.expiresAt.toISOString(),
          callback_url: r.callbackUrl,
        }, CheckoutReply).pipe(
          Effect.map((a) => ({
            checkoutUrl: a.checkout_url,
            paymentLinkUrl: a.payment_link_url ?? a.checkout_url,
            providerReference: a.reference,
          })),
        ),
      ussdPush: (r) =>
        post("/ussd-push", { amount: r.amount, currency: "TZS", phone_number: r.phoneNumber, reference: r.reference }, UssdPushReply).pipe(
          Effect.map((a) => ({ providerReference: a.reference })),
        ),
    })
  }),
)
