/**
 * Top-ups: money coming into the wallet through the payment gateway. A top-up is written as
 * `pending` and committed before the gateway is asked, so a payment can never exist at the
 * gateway without a row here to credit; if the gateway refuses, the row ends `failed`. The
 * wallet itself is credited only by a gateway event (effects/billing/payment-events.ts).
 */
import { Clock, Context, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { Forbidden, type NotConfigured, NotFound, ProviderError, ValidationError } from "../errors.ts"
import { Database, type DbError, isUniqueViolation, queryAs } from "../ports/Database.ts"
import { type Checkout, type GatewayError, PaymentGateway, type UssdPush } from "../ports/PaymentGateway.ts"
import { randomHex } from "../shared/crypto.ts"
import { normalizeTzPhone } from "../shared/schema.ts"
import { MAX_TOPUP_TZS, MIN_TOPUP_TZS, Topup, type TopupChannel } from "./schema.ts"
import { newestFirst } from "../shared/pages.ts"

/** SPEC.md: the checkout link is valid 1 hour. */
export const CHECKOUT_LIFETIME_MS = 60 * 60 * 1000

/** Where gateways post their status events (DECISIONS.md). */
export const PAYMENT_EVENTS_PATH = "/api/billing/payments/events"

type StartError = ValidationError | ProviderError | NotConfigured | DbError

export interface TopupsShape {
  /** A pending top-up with a hosted checkout link (card or mobile money), valid 1 hour. */
  readonly create: (userId: number, amount: number) => Effect.Effect<{ topup: Topup; checkout: Checkout }, StartError>
  /**
   * A pending top-up paid by a USSD prompt on the account's verified phone. `phoneNumber`, when
   * given, must be that phone: a prompt is never sent to somebody else's number.
   */
  readonly createPhone: (
    userId: number,
    amount: number,
    phoneNumber?: string,
  ) => Effect.Effect<{ topup: Topup; push: UssdPush }, StartError>
  /** One of the account's top-ups: NOT_FOUND if missing, FORBIDDEN if another account's. */
  readonly get: (userId: number, id: number) => Effect.Effect<Topup, NotFound | Forbidden | DbError>
  /** The account's top-ups, newest first. */
  readonly list: (
    userId: number,
    page: { readonly limit: number; readonly offset: number },
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<Topup>; readonly total: number }, DbError>
}

const validAmount = (amount: number) =>
  Number.isSafeInteger(amount) && amount >= MIN_TOPUP_TZS && amount <= MAX_TOPUP_TZS
    ? Effect.void
    : Effect.fail(ValidationError.field("amount_tzs", `amount_tzs must be a whole number of TZS from ${MIN_TOPUP_TZS} to ${MAX_TOPUP_TZS}`))

export class Topups extends Context.Service<Topups, TopupsShape>()("app/Topups") {
  static readonly layer = Layer.effect(
    Topups,
    Effect.gen(function*() {
      const db = yield* Database
      const gateway = yield* PaymentGateway
      const config = yield* AppConfig

      const open = (userId: number, amount: number, channel: TopupChannel, phoneNumber: string | null) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const reference = `top_${yield* randomHex(12)}`
          const [row] = yield* queryAs(
            db,
            Topup,
            `INSERT INTO topups (user_id, amount_tzs, channel, reference, phone_number, expires_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING *`,
            [userId, amount, channel, reference, phoneNumber, new Date(now + CHECKOUT_LIFETIME_MS), new Date(now)],
          )
          return row!
        })

      const markFailed = (id: number, reason: string) =>
        db.query(
          "UPDATE topups SET status = 'failed', failure_reason = $2, updated_at = now() WHERE id = $1 AND status = 'pending'",
          [id, reason],
        )

      /**
       * Asks the gateway, then stores its reference. Any failure on the way leaves the row
       * `failed`, never `pending`: a pending top-up must be one a customer can still pay.
       */
      const start = <A extends { providerReference: string }>(
        topup: Topup,
        ask: Effect.Effect<A, GatewayError>,
        links: (a: A) => { checkout_url: string | null; payment_link_url: string | null },
      ) =>
        Effect.gen(function*() {
          const answer = yield* ask
          const { checkout_url, payment_link_url } = links(answer)
          const [row] = yield* queryAs(
            db,
            Topup,
            `UPDATE topups SET provider_reference = $2, checkout_url = $3, payment_link_url = $4, updated_at = now()
              WHERE id = $1 RETURNING *`,
            [topup.id, answer.providerReference, checkout_url, payment_link_url],
          ).pipe(
            Effect.catchIf(isUniqueViolation, (e) =>
              Effect.fail(new ProviderError({ message: "the payment gateway answered with a reference already in use", detail: e.message }))),
          )
          return { topup: row!, answer }
        }).pipe(Effect.tapError((e) => markFailed(topup.id, e._tag === "DbError" ? "internal_error" : "gateway_error")))

      const create = Effect.fn("Topups.create")(function*(userId: number, amount: number) {
        yield* validAmount(amount)
        const topup = yield* open(userId, amount, "checkout", null)
        const { topup: started, answer } = yield* start(
          topup,
          gateway.checkout({
            amount,
            reference: topup.reference,
            expiresAt: topup.expires_at,
            callbackUrl: `${config.baseUrl}${PAYMENT_EVENTS_PATH}`,
          }),
          (c) => ({ checkout_url: c.checkoutUrl, payment_link_url: c.paymentLinkUrl }),
        )
        return { topup: started, checkout: answer }
      })

      const createPhone = Effect.fn("Topups.createPhone")(function*(userId: number, amount: number, phoneNumber?: string) {
        yield* validAmount(amount)
        const [user] = yield* db.query<{ phone_number: string | null; phone_verified: boolean }>(
          "SELECT phone_number, phone_verified FROM users WHERE id = $1",
          [userId],
        )
        if (!user?.phone_verified || !user.phone_number) {
          return yield* ValidationError.field(
            "phone_number",
            "a verified phone number is required for a mobile-money top-up; verify one with POST /api/auth/phone",
          )
        }
        if (phoneNumber !== undefined && normalizeTzPhone(phoneNumber) !== user.phone_number) {
          return yield* ValidationError.field("phone_number", "phone_number must be the account's verified phone number")
        }
        const topup = yield* open(userId, amount, "ussd_push", user.phone_number)
        const { topup: started, answer } = yield* start(
          topup,
          gateway.ussdPush({ amount, phoneNumber: user.phone_number, reference: topup.reference }),
          () => ({ checkout_url: null, payment_link_url: null }),
        )
        return { topup: started, push: answer }
      })

      const get = Effect.fn("Topups.get")(function*(userId: number, id: number) {
        const [row] = yield* queryAs(db, Topup, "SELECT * FROM topups WHERE id = $1", [id])
        if (!row) return yield* new NotFound({ message: `no top-up ${id}` })
        if (row.user_id !== userId) return yield* new Forbidden({ message: "this top-up belongs to another account" })
        return row
      })

      const page = newestFirst(db, "topups", "user_id", Topup)
      const list = (userId: number, p: { limit: number; offset: number }) => page(userId, p).pipe(Effect.withSpan("Topups.list"))

      return Topups.of({ create, createPhone, get, list })
    }),
  )
}
