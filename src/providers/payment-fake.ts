/**
 * The embedded fake payment gateway (the default while PAYMENT_API_URL is unset). It behaves
 * like an external gateway so the real flow runs end to end on a laptop: it keeps its own
 * payments, its checkout URL is a page of this service (src/http/routes/fake-gateway.ts) with
 * "Pay" and "Fail" buttons, and a press emits the same HMAC-signed event a real gateway would,
 * over HTTP to the callback URL (`{BASE_URL}/api/billing/payments/events`).
 *
 * A second press re-sends the event already emitted (same id): the service must answer it as a
 * duplicate, which makes idempotency visible by hand. Paying after the link expired emits
 * `payment.expired` instead, as a real gateway would.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { NotFound, ProviderError } from "../../effects/errors.ts"
import { Database, type DbError } from "../../effects/ports/Database.ts"
import { HttpClient } from "../../effects/ports/HttpClient.ts"
import { PaymentGateway, type PaymentGatewayShape } from "../../effects/ports/PaymentGateway.ts"
import { hmacSha256Hex, randomHex } from "../../effects/shared/crypto.ts"

export const FAKE_CHECKOUT_PATH = "/fake-gateway/checkout"
const EVENTS_PATH = "/api/billing/payments/events"

export interface FakeGatewayPayment {
  readonly provider_reference: string
  readonly reference: string
  readonly amount_tzs: number
  readonly channel: "checkout" | "ussd_push"
  readonly phone_number: string | null
  readonly callback_url: string
  readonly expires_at: Date
  readonly status: "open" | "paid" | "failed" | "expired"
  readonly event_id: string | null
  readonly event_body: string | null
  readonly created_at: Date
}

/** What the service answered when the fake gateway delivered its event. */
export type Delivery =
  | { readonly ok: true; readonly status: number; readonly outcome: string | undefined }
  | { readonly ok: false; readonly status: number | null; readonly error: string }

export interface FakeGatewayShape extends PaymentGatewayShape {
  readonly find: (providerReference: string) => Effect.Effect<Option.Option<FakeGatewayPayment>, DbError>
  /** A button press: settles an open payment, then delivers its event (again, if already settled). */
  readonly press: (
    providerReference: string,
    action: "pay" | "fail",
  ) => Effect.Effect<{ readonly payment: FakeGatewayPayment; readonly delivery: Delivery }, NotFound | DbError>
}

export class FakeGateway extends Context.Service<FakeGateway, FakeGatewayShape>()("app/FakeGateway") {
  static readonly layer = Layer.effect(
    FakeGateway,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const http = yield* HttpClient

      const open = (p: {
        amount: number
        reference: string
        channel: FakeGatewayPayment["channel"]
        phoneNumber: string | null
        callbackUrl: string
        expiresAt: Date
      }) =>
        Effect.gen(function*() {
          const providerReference = `fake_${yield* randomHex(12)}`
          yield* db.query(
            `INSERT INTO fake_gateway_payments (provider_reference, reference, amount_tzs, channel, phone_number, callback_url, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)`,
            [providerReference, p.reference, p.amount, p.channel, p.phoneNumber, p.callbackUrl, p.expiresAt],
          )
          return { providerReference, pageUrl: `${config.baseUrl}${FAKE_CHECKOUT_PATH}/${providerReference}` }
        }).pipe(
          // Seen from the caller this is the gateway failing, so the top-up ends failed, not pending.
          Effect.mapError((e) => new ProviderError({ message: "the payment gateway could not start the payment; try again", detail: e.message })),
        )

      const find = (providerReference: string) =>
        db.query<FakeGatewayPayment>("SELECT * FROM fake_gateway_payments WHERE provider_reference = $1", [providerReference]).pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
        )

      const deliver = (payment: FakeGatewayPayment, body: string) =>
        Effect.gen(function*() {
          const signature = yield* hmacSha256Hex(config.paymentWebhookSecret, body)
          return yield* Effect.tryPromise({
            try: async (signal): Promise<Delivery> => {
              const res = await http.fetch(payment.callback_url, {
                method: "POST",
                headers: { "content-type": "application/json", "x-gateway-signature": signature },
                body,
                signal,
              })
              const reply = (await res.json().catch(() => ({}))) as { data?: { outcome?: string }; message?: string }
              return res.ok
                ? { ok: true, status: res.status, outcome: reply.data?.outcome }
                : { ok: false, status: res.status, error: reply.message ?? res.statusText }
            },
            catch: (e) => e,
          }).pipe(
            Effect.timeout("10 seconds"),
            Effect.catch((e) => Effect.succeed<Delivery>({ ok: false, status: null, error: String(e) })),
          )
        })

      const press = Effect.fn("FakeGateway.press")(function*(providerReference: string, action: "pay" | "fail") {
        const found = yield* find(providerReference)
        if (Option.isNone(found)) return yield* new NotFound({ message: `no fake gateway payment ${providerReference}` })
        let payment = found.value
        if (payment.status === "open") {
          const now = yield* Clock.currentTimeMillis
          const expired = now >= payment.expires_at.getTime()
          const event = action === "fail" ? "payment.failed" : expired ? "payment.expired" : "payment.completed"
          const status = action === "fail" ? "failed" : expired ? "expired" : "paid"
          const eventId = `evt_${yield* randomHex(12)}`
          const body = JSON.stringify({
            id: eventId,
            event,
            provider_reference: payment.provider_reference,
            amount_tzs: payment.amount_tzs,
            occurred_at: new Date(now).toISOString(),
          })
          // Only an open payment is settled: of two quick presses, the first one's event wins.
          const [settled] = yield* db.query<FakeGatewayPayment>(
            `UPDATE fake_gateway_payments SET status = $2, event_id = $3, event_body = $4
              WHERE provider_reference = $1 AND status = 'open' RETURNING *`,
            [providerReference, status, eventId, body],
          )
          payment = settled ?? Option.getOrThrow(yield* find(providerReference))
        }
        const delivery = yield* deliver(payment, payment.event_body!)
        return { payment, delivery }
      })

      const callbackUrl = `${config.baseUrl}${EVENTS_PATH}`

      return FakeGateway.of({
        checkout: (r) =>
          open({
            amount: r.amount,
            reference: r.reference,
            channel: "checkout",
            phoneNumber: null,
            callbackUrl: r.callbackUrl,
            expiresAt: r.expiresAt,
          }).pipe(Effect.map(({ pageUrl, providerReference }) => ({ checkoutUrl: pageUrl, paymentLinkUrl: pageUrl, providerReference }))),
        ussdPush: (r) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const { pageUrl, providerReference } = yield* open({
              amount: r.amount,
              reference: r.reference,
              channel: "ussd_push",
              phoneNumber: r.phoneNumber,
              callbackUrl,
              // The USSD contract carries no expiry; a phone prompt is short-lived anyway.
              expiresAt: new Date(now + 60 * 60 * 1000),
            })
            // No phone to ring: the prompt is the fake checkout page, announced in the log
            // the way the embedded SMS default logs OTP codes.
            yield* Effect.logInfo("fake gateway: USSD push").pipe(
              Effect.annotateLogs({ phone_number: r.phoneNumber, amount_tzs: r.amount, approve_at: pageUrl }),
            )
            return { providerReference }
          }),
        find,
        press,
      })
    }),
  )
}

/** The PaymentGateway port backed by the fake (FakeGateway stays available for its pages). */
export const fakePaymentGatewayLayer = Layer.effect(
  PaymentGateway,
  Effect.gen(function*() {
    const fake = yield* FakeGateway
    return PaymentGateway.of({ checkout: fake.checkout, ussdPush: fake.ussdPush })
  }),
).pipe(Layer.provideMerge(FakeGateway.layer))
