/**
 * Payment gateway status events: the only way money from a top-up reaches the wallet.
 *
 * Gateways retry, reorder and replay deliveries, so each event is handled in one transaction
 * that first locks its top-up row: every event about one top-up is serialized there, and only a
 * `pending` top-up moves. An event id is accepted once (a partial unique index backs the check);
 * a completed top-up is credited once (a unique index on the ledger backs that too). Every signed
 * delivery is recorded with its outcome, including rejected ones, for reconciliation.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { NotFound, Unauthorized, ValidationError } from "../errors.ts"
import { Database, DbError, isUniqueViolation, queryAs } from "../ports/Database.ts"
import { hmacSha256Hex, timingSafeEqual } from "../shared/crypto.ts"
import { isPaymentEventName, PAYMENT_EVENT_NAMES, type PaymentEventBody, type PaymentEventOutcome, Topup } from "./schema.ts"
import { Billing } from "./service.ts"

export type AcceptedOutcome = "applied" | "ignored" | "duplicate"

export interface PaymentEventResult {
  readonly event_id: string
  readonly outcome: AcceptedOutcome
  readonly topup: Topup
}

export interface PaymentEventsShape {
  /** Fails UNAUTHORIZED unless `signature` is the hex HMAC-SHA256 of `rawBody` (constant-time). */
  readonly verify: (rawBody: string, signature: string | undefined) => Effect.Effect<void, Unauthorized>
  /**
   * Applies one verified event. Accepted (200): applied, ignored (top-up no longer pending) or
   * duplicate (event id seen). Rejected, recorded, nothing moved: unknown event name and amount
   * mismatch (VALIDATION_ERROR), unknown provider_reference (NOT_FOUND).
   */
  readonly receive: (
    event: PaymentEventBody,
    rawBody: string,
  ) => Effect.Effect<PaymentEventResult, ValidationError | NotFound | DbError>
}

type Decision = { readonly outcome: PaymentEventOutcome; readonly topup: Topup | undefined }

export class PaymentEvents extends Context.Service<PaymentEvents, PaymentEventsShape>()("app/PaymentEvents") {
  static readonly layer = Layer.effect(
    PaymentEvents,
    Effect.gen(function*() {
      const db = yield* Database
      const billing = yield* Billing
      const config = yield* AppConfig

      const verify = (rawBody: string, signature: string | undefined) =>
        Effect.gen(function*() {
          const expected = yield* hmacSha256Hex(config.paymentWebhookSecret, rawBody)
          if (!timingSafeEqual((signature ?? "").trim().toLowerCase(), expected)) {
            return yield* new Unauthorized({ message: "missing or invalid X-Gateway-Signature" })
          }
        }).pipe(Effect.withSpan("PaymentEvents.verify"))

      const record = (e: PaymentEventBody, rawBody: string, topupId: number | null, outcome: PaymentEventOutcome) =>
        db.query(
          `INSERT INTO payment_events (event_id, event, provider_reference, amount_tzs, occurred_at, topup_id, outcome, payload)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)`,
          [e.id, e.event, e.provider_reference, e.amount_tzs, new Date(e.occurred_at), topupId, outcome, rawBody],
        )

      /** Moves a pending top-up; the caller holds its row lock. */
      const settle = (topup: Topup, e: PaymentEventBody) =>
        Effect.gen(function*() {
          const now = new Date(yield* Clock.currentTimeMillis)
          const completed = e.event === "payment.completed"
          const [moved] = yield* queryAs(
            db,
            Topup,
            `UPDATE topups SET status = $2, failure_reason = $3, completed_at = $4, updated_at = $5
              WHERE id = $1 AND status = 'pending' RETURNING *`,
            [topup.id, completed ? "completed" : "failed", completed ? null : e.event, completed ? now : null, now],
          )
          if (moved && completed) {
            yield* billing.credit({
              userId: topup.user_id,
              amount: topup.amount_tzs,
              kind: "credit",
              reference: { type: "topup", id: topup.id },
              description: `Top-up ${topup.reference}`,
            }).pipe(Effect.catchTag("ValidationError", (v) => Effect.die(v))) // amounts are checked at creation
          }
          return moved
        })

      const decide = (e: PaymentEventBody, rawBody: string) =>
        Effect.gen(function*() {
          const done = (outcome: PaymentEventOutcome, topup: Topup | undefined) =>
            Effect.as(record(e, rawBody, topup?.id ?? null, outcome), { outcome, topup } satisfies Decision)

          if (!isPaymentEventName(e.event)) return yield* done("unknown_event", undefined)
          const [topup] = yield* queryAs(db, Topup, "SELECT * FROM topups WHERE provider_reference = $1 FOR UPDATE", [e.provider_reference])
          if (!topup) return yield* done("unknown_reference", undefined)
          const [seen] = yield* db.query(
            "SELECT 1 FROM payment_events WHERE event_id = $1 AND outcome IN ('applied', 'ignored') LIMIT 1",
            [e.id],
          )
          if (seen) return yield* done("duplicate", topup)
          if (e.amount_tzs !== topup.amount_tzs) return yield* done("amount_mismatch", topup)
          if (topup.status !== "pending") return yield* done("ignored", topup)
          const moved = yield* settle(topup, e)
          return yield* done(moved ? "applied" : "ignored", moved ?? topup)
        })

      /**
       * A unique violation means a concurrent delivery of the same event (or a second credit of
       * the same top-up) won the race: this one's transaction rolled back whole, so it is a duplicate.
       */
      const asDuplicate = (e: PaymentEventBody, rawBody: string) =>
        Effect.gen(function*() {
          const [topup] = yield* queryAs(db, Topup, "SELECT * FROM topups WHERE provider_reference = $1", [e.provider_reference])
          const outcome: PaymentEventOutcome = topup ? "duplicate" : "unknown_reference"
          yield* record(e, rawBody, topup?.id ?? null, outcome)
          return { outcome, topup } satisfies Decision
        })

      const receive = Effect.fn("PaymentEvents.receive")(function*(e: PaymentEventBody, rawBody: string) {
        const decision = yield* db.transaction(decide(e, rawBody)).pipe(
          Effect.catchIf((err): err is DbError => err instanceof DbError && isUniqueViolation(err), () => asDuplicate(e, rawBody)),
        )
        const { outcome, topup } = decision
        switch (outcome) {
          case "unknown_event":
            return yield* ValidationError.field("event", `unknown event "${e.event}"; expected one of ${PAYMENT_EVENT_NAMES.join(", ")}`)
          case "unknown_reference":
            return yield* new NotFound({ message: `no top-up has provider_reference "${e.provider_reference}"` })
          case "amount_mismatch":
            return yield* ValidationError.field(
              "amount_tzs",
              `amount_tzs ${e.amount_tzs} does not match the top-up's amount ${topup!.amount_tzs}`,
            )
        }
        return { event_id: e.id, outcome, topup: topup! } satisfies PaymentEventResult
      })

      return PaymentEvents.of({ verify, receive })
    }),
  )
}
