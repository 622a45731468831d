/**
 * SMS notifications: per-address rules that forward a short summary of each inbound message to
 * a phone, sent with the account's own SMS provider key (the platform does not charge for SMS).
 * The key is shown once and kept sealed, because every send needs it again.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { insertWithinCap } from "../shared/caps.ts"
import { owned, ownedAddress as ownedAddressOf } from "../shared/ownership.ts"
import { Conflict, Forbidden, type LimitReached, NotFound } from "../errors.ts"
import { Database, type DbError, isUniqueViolation } from "../ports/Database.ts"
import { seal } from "../shared/secretbox.ts"
import { normalizeTzPhone } from "../shared/schema.ts"
import { KEY_CONTEXT } from "./delivery.ts"
import { type CreateSmsRuleBody, keyPrefix, type SmsDelivery, type SmsDeliveryRow, type SmsRule, type SmsRuleRow, toSmsDelivery, toSmsRule } from "./schema.ts"
import { newestFirst } from "../shared/pages.ts"

/**
 * Active rules one address may have (409 LIMIT_REACHED past it). Each inbound message is one send
 * per active rule, so without a bound one 5 TZS message could make thousands of calls to the SMS
 * provider (with keys the provider may refuse, and retried).
 */
export const MAX_ACTIVE_RULES_PER_ADDRESS = 10

export interface SmsNotificationsShape {
  /** Creates an active rule on an owned address; the answer carries the provider key, once. */
  readonly create: (userId: number, body: CreateSmsRuleBody) => Effect.Effect<SmsRule, Forbidden | NotFound | Conflict | LimitReached | DbError>
  readonly list: (userId: number, addressId: number) => Effect.Effect<ReadonlyArray<SmsRule>, Forbidden | NotFound | DbError>
  /** Stops the rule for good; queued sends of it fail instead of going out. Idempotent. */
  readonly revoke: (userId: number, id: number) => Effect.Effect<SmsRule, Forbidden | NotFound | DbError>
  /** Deliveries of one rule, newest first. */
  readonly deliveries: (
    userId: number,
    id: number,
    page: { readonly limit: number; readonly offset: number },
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<SmsDelivery>; readonly total: number }, Forbidden | NotFound | DbError>
}

export class SmsNotifications extends Context.Service<SmsNotifications, SmsNotificationsShape>()("app/SmsNotifications") {
  static readonly layer = Layer.effect(
    SmsNotifications,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const ownedAddress = (userId: number, addressId: number) => ownedAddressOf(db, userId, addressId)

      const ownedRule = (userId: number, id: number) =>
        Effect.flatMap(db.query<SmsRuleRow>("SELECT * FROM sms_rules WHERE id = $1", [id]), (rows) => owned("SMS rule", rows, userId))

      const create = Effect.fn("SmsNotifications.create")(function*(userId: number, body: CreateSmsRuleBody) {
        yield* ownedAddress(userId, body.address_id)
        const sealed = yield* seal(config.secretsKey, body.provider_key, KEY_CONTEXT)
        const at = yield* now
        const rows = yield* insertWithinCap(db, {
          table: "sms_rules",
          per: ["address_id", body.address_id],
          counting: "is_active",
          max: MAX_ACTIVE_RULES_PER_ADDRESS,
          message: `an address can have at most ${MAX_ACTIVE_RULES_PER_ADDRESS} active SMS rules; revoke one first`,
        }, db.query<SmsRuleRow>(
          `INSERT INTO sms_rules (user_id, address_id, phone_number, provider_key_sealed, provider_key_prefix, created_at)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
          [userId, body.address_id, normalizeTzPhone(body.phone_number), sealed, keyPrefix(body.provider_key), at],
        )).pipe(
          Effect.catchTag("DbError", (e): Effect.Effect<never, Conflict | DbError> =>
            isUniqueViolation(e)
              ? Effect.fail(new Conflict({ message: "an active rule already forwards this address to this phone number", field: "phone_number" }))
              : Effect.fail(e)),
        )
        return toSmsRule(rows[0]!, body.provider_key)
      })

      const list = Effect.fn("SmsNotifications.list")(function*(userId: number, addressId: number) {
        yield* ownedAddress(userId, addressId)
        const rows = yield* db.query<SmsRuleRow>("SELECT * FROM sms_rules WHERE address_id = $1 ORDER BY id", [addressId])
        return rows.map((r) => toSmsRule(r))
      })

      const revoke = Effect.fn("SmsNotifications.revoke")(function*(userId: number, id: number) {
        const current = yield* ownedRule(userId, id)
        if (!current.is_active) return toSmsRule(current)
        const [row] = yield* db.query<SmsRuleRow>(
          "UPDATE sms_rules SET is_active = false, revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *",
          [id, yield* now],
        )
        return toSmsRule(row ?? current)
      })

      const deliveryPage = newestFirst<SmsDeliveryRow>(db, "sms_deliveries", "rule_id")
      const deliveries = Effect.fn("SmsNotifications.deliveries")(function*(userId: number, id: number, page: { limit: number; offset: number }) {
        yield* ownedRule(userId, id)
        const { rows, total } = yield* deliveryPage(id, page)
        return { rows: rows.map(toSmsDelivery), total }
      })

      return SmsNotifications.of({ create, list, revoke, deliveries })
    }),
  )
}
