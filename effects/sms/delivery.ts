/**
 * SMS deliveries: one row per (rule, message), written in the transaction that stored the
 * message (the unique constraint makes a second queuing of the same message a no-op), then sent
 * by the SMS worker (src/workers/sms.ts) with the rule's own provider key on the shared delivery
 * machine (deliveries/outbox.ts): the same lease, take-then-record rule, attempt cap and retry
 * schedule as webhooks. A retry keeps the row `pending` (the SMS states have no `retrying`).
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { AppConfig, smsSends } from "../config.ts"
import { type Channel, delivered, failed, makeAttempt } from "../deliveries/outbox.ts"
import type { NotConfigured, ProviderError } from "../errors.ts"
import type { StoredMessage } from "../ingest/events.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { SmsGateway } from "../ports/SmsGateway.ts"
import { WorkSignals } from "../ports/WorkSignals.ts"
import { openText } from "../shared/secretbox.ts"
import type { SmsDeliveryRow, SmsRuleRow } from "./schema.ts"
import { smsSummary } from "./summary.ts"

/** WorkSignals queue (and worker) name. */
export const SMS_QUEUE = "sms"
/** Secretbox context of `sms_rules.provider_key_sealed`. */
export const KEY_CONTEXT = "sms.provider_key"

/** Whether another attempt can help: not for refusals of the request itself (bad key, bad number). */
const retryable = (e: ProviderError | NotConfigured): boolean => {
  if (e._tag === "NotConfigured") return false
  const status = /^HTTP (\d{3})$/.exec(e.detail ?? "")?.[1]
  return status === undefined || !status.startsWith("4") || status === "408" || status === "429"
}

/** `last_error`: the provider's status at most, never its body (it may echo the key). */
const describe = (e: ProviderError | NotConfigured): string =>
  e._tag === "ProviderError" && /^HTTP \d{3}$/.test(e.detail ?? "") ? `${e.message} (${e.detail})` : e.message

export interface SmsDeliveriesShape {
  /** Queues one SMS per active rule of the message's address; joins the storing transaction. */
  readonly enqueue: (message: StoredMessage) => Effect.Effect<ReadonlyArray<SmsDeliveryRow>, DbError>
  /** `enqueue` for the messages of one ingest commit; returns how many sends it queued. */
  readonly enqueueMany: (messages: ReadonlyArray<StoredMessage>) => Effect.Effect<number, DbError>
  /** Makes the next attempt of a claimed delivery; returns when the following one is due, if any. */
  readonly attempt: (job: SmsDeliveryRow) => Effect.Effect<Option.Option<Date>, DbError>
  readonly wake: Effect.Effect<void>
}

export class SmsDeliveries extends Context.Service<SmsDeliveries, SmsDeliveriesShape>()("app/SmsDeliveries") {
  static readonly layer = Layer.effect(
    SmsDeliveries,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const gateway = yield* SmsGateway
      const signals = yield* WorkSignals
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const send = (job: SmsDeliveryRow, rule: SmsRuleRow) =>
        Effect.gen(function*() {
          // Decided as the gateway was chosen: with the log stand-in (SMS_PROVIDER=log, or no SMS_API_URL)
          // a rule's send must fail as not configured, never be logged and reported as sent.
          if (!smsSends(config)) return failed("SMS sending is not configured on this server", false)
          const key = yield* Effect.result(openText(config.secretsKey, rule.provider_key_sealed, KEY_CONTEXT))
          if (key._tag === "Failure") return failed("provider key cannot be decrypted (SECRETS_KEY changed?)", false)
          const sent = yield* Effect.result(gateway.send({ to: rule.phone_number, message: job.body }, { apiKey: key.success }))
          if (sent._tag === "Success") return delivered({ sent_at: yield* now, provider_message_id: sent.success.messageId })
          return failed(describe(sent.failure), retryable(sent.failure))
        })

      const channel: Channel<SmsDeliveryRow, SmsRuleRow> = {
        name: "SmsDeliveries",
        table: "sms_deliveries",
        targetKey: "rule_id",
        targetTable: "sms_rules",
        statuses: { open: ["pending"], retrying: "pending", delivered: "sent" },
        inactive: "rule revoked",
        noAnswer: {},
        perform: send,
      }

      /**
       * The messages, each with the text its summary reads. One that came without it (its text was
       * never made into a string on its way in: the database made it from the raw MIME,
       * effects/ingest/prepare.ts) reads its stored row's, in the storing transaction.
       */
      const withSmsBodies = Effect.fnUntraced(function*(messages: ReadonlyArray<StoredMessage>) {
        const missing = messages.filter((m) => m.smsBody === undefined)
        if (missing.length === 0) return messages as ReadonlyArray<StoredMessage & { readonly smsBody: string }>
        const rows = yield* db.query<{ id: number; text_body: string }>(
          "SELECT id, text_body FROM inbound_messages WHERE id = ANY($1::int8[])",
          [`{${missing.map((m) => m.id).join(",")}}`],
        )
        const texts = new Map(rows.map((r) => [Number(r.id), r.text_body]))
        return messages.map((m) => (m.smsBody === undefined ? { ...m, smsBody: texts.get(m.id) ?? "" } : m) as StoredMessage & { readonly smsBody: string })
      })

      const enqueue = Effect.fn("SmsDeliveries.enqueue")(function*(stored: StoredMessage) {
        const [message] = yield* withSmsBodies([stored])
        const at = yield* now
        return yield* db.query<SmsDeliveryRow>(
          `INSERT INTO sms_deliveries (rule_id, message_id, body, status, attempt, next_attempt_at, created_at)
           SELECT id, $1, $3, 'pending', 0, $4, $4 FROM sms_rules WHERE address_id = $2 AND is_active ORDER BY id
           ON CONFLICT (rule_id, message_id) DO NOTHING
           RETURNING *`,
          [message!.id, message!.addressId, smsSummary(message!), at],
        )
      })

      const enqueueMany = Effect.fn("SmsDeliveries.enqueueMany")(function*(messages: ReadonlyArray<StoredMessage>) {
        if (messages.length === 0) return 0
        // Which addresses have a rule at all, first: the summary is only worth making for those.
        const addressIds = [...new Set(messages.map((m) => m.addressId))]
        // A function (migration 028) so PGlite keeps its plan: it runs in every ingest commit.
        const ruled = new Set((yield* db.query<{ address_id: number }>(
          "SELECT address_id FROM sms_ruled_addresses($1::int8[]) AS address_id",
          [`{${addressIds.join(",")}}`],
        )).map((r) => Number(r.address_id)))
        const wanted = yield* withSmsBodies(messages.filter((m) => ruled.has(m.addressId)))
        if (wanted.length === 0) return 0
        const at = yield* now
        const rows = yield* db.query(
          `INSERT INTO sms_deliveries (rule_id, message_id, body, status, attempt, next_attempt_at, created_at)
           SELECT r.id, m.id, m.body, 'pending', 0, $1, $1
             FROM json_to_recordset($2::json) AS m (id int8, address_id int8, body text)
             JOIN sms_rules r ON r.address_id = m.address_id AND r.is_active
            ORDER BY m.id, r.id
           ON CONFLICT (rule_id, message_id) DO NOTHING
           RETURNING id`,
          [at, JSON.stringify(wanted.map((m) => ({ id: m.id, address_id: m.addressId, body: smsSummary(m) })))],
        )
        return rows.length
      })

      return SmsDeliveries.of({ enqueue, enqueueMany, attempt: yield* makeAttempt(channel), wake: signals.notify(SMS_QUEUE) })
    }),
  )
}
