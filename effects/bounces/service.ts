/**
 * Bounces and complaints of outbound mail (DECISIONS.md "Bounces, complaints and outbound
 * events"). Mail that comes back to a recipient's VERP return path is read here: a 5.x.x
 * bounce marks the recipient `bounced` and suppresses the address, a 4.x.x delay marks it
 * `deferred`, an abuse report (ARF) marks it `complained` and suppresses it. The recipient's
 * `status` (what the relay answered) never changes.
 *
 * Entry points for the MX (free of charge, before the normal address routing):
 * `isReturnPath` at RCPT decides that an address is this service's, `parseReturnPath` accepts it
 * or refuses it (550 5.1.1), and `process` at the end of DATA records what the message says.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { EventDeliveries } from "../webhooks/event-deliveries.ts"
import { readReport, verdictFor } from "./report.ts"
import { looksLikeReturnPath, readReturnPath, returnPathKey, type VerpRecipient } from "./verp.ts"

/** Not a return path of a message this platform sent: wrong shape or tag, unknown message or recipient. */
export class InvalidReturnPath extends Schema.TaggedError<InvalidReturnPath>()("InvalidReturnPath", {
  address: Schema.String,
}) {}

/** What came back to a return path, as the MX hands it over. */
export interface BounceIntake {
  /** The message as received (trace headers may be prepended). */
  readonly raw: Uint8Array
  /** MAIL FROM: `''` for the null sender of delivery reports, a feedback loop's address for ARF. */
  readonly mailFrom: string
  /** The recipient the return path names (`parseReturnPath`). */
  readonly recipient: VerpRecipient
}

export type BounceOutcome =
  | {
    readonly _tag: "Recorded"
    readonly emailId: number
    readonly recipient: string
    readonly type: "bounced" | "deferred" | "complained"
    readonly smtpCode: string | null
    readonly diagnostic: string | null
    readonly suppressed: boolean
  }
  /** Nothing changed: not a bounce or complaint, or it would downgrade what is already known. */
  | { readonly _tag: "Ignored"; readonly reason: string }

export interface BouncesShape {
  /** Whether `address` has the return-path shape on the platform domain (RCPT: this service's, not a mailbox's). */
  readonly isReturnPath: (address: string) => boolean
  /** The recipient a return path names, if its tag is right and the message and recipient exist. */
  readonly parseReturnPath: (address: string) => Effect.Effect<VerpRecipient, InvalidReturnPath | DbError>
  /**
   * Reads what came back and records it on the recipient in one transaction: feedback, the
   * suppression list, and the `email.bounced` / `email.deferred` / `email.complained` event
   * for the account's endpoints. Never charges.
   */
  readonly process: (intake: BounceIntake) => Effect.Effect<BounceOutcome, DbError>
}

/** A later report never downgrades an earlier one: a delay after a bounce changes nothing. */
const RANK = { deferred: 1, bounced: 2, complained: 3 } as const

const EVENT = { bounced: "email.bounced", deferred: "email.deferred", complained: "email.complained" } as const

interface RecipientRow {
  readonly id: number
  readonly email: string
  readonly user_id: number
  readonly feedback_type: keyof typeof RANK | null
  readonly feedback_smtp_code: string | null
  readonly feedback_diagnostic: string | null
}

export class Bounces extends Context.Service<Bounces, BouncesShape>()("app/Bounces") {
  static readonly layer = Layer.effect(
    Bounces,
    Effect.gen(function*() {
      const db = yield* Database
      const key = returnPathKey(yield* AppConfig)
      const events = yield* EventDeliveries

      /** The recipient at `recipientIndex` of the message (recipients in the order they were recorded). */
      const recipientAt = (r: VerpRecipient, lock: boolean) =>
        Effect.map(
          db.query<RecipientRow>(
            `SELECT r.id, r.email, m.user_id, r.feedback_type, r.feedback_smtp_code, r.feedback_diagnostic
               FROM outbound_recipients r JOIN outbound_messages m ON m.id = r.message_id
              WHERE r.message_id = $1
              ORDER BY r.id OFFSET $2 LIMIT 1${lock ? " FOR UPDATE OF r" : ""}`,
            [r.emailId, r.recipientIndex],
          ),
          (rows) => rows[0],
        )

      const parseReturnPath = Effect.fn("Bounces.parseReturnPath")(function*(address: string) {
        const named = readReturnPath(key, address)
        if (Option.isNone(named)) return yield* new InvalidReturnPath({ address })
        if (!(yield* recipientAt(named.value, false))) return yield* new InvalidReturnPath({ address })
        return named.value
      })

      const process = Effect.fn("Bounces.process")(function*(intake: BounceIntake) {
        const report = yield* readReport(intake.raw)
        const outcome = yield* db.transaction(Effect.gen(function*() {
          const row = yield* recipientAt(intake.recipient, true)
          if (!row) return { _tag: "Ignored", reason: "the message or recipient no longer exists" } as const
          const verdict = verdictFor(report, row.email)
          if ("ignored" in verdict) return { _tag: "Ignored", reason: verdict.ignored } as const
          if (row.feedback_type && RANK[row.feedback_type] > RANK[verdict.type]) {
            return { _tag: "Ignored", reason: `already ${row.feedback_type}` } as const
          }
          // The same report again: a sender retrying a message whose mailbox copies failed to store
          // (451) after the report was read. Recording it twice would send the event twice.
          if (
            row.feedback_type === verdict.type && row.feedback_smtp_code === verdict.smtpCode &&
            row.feedback_diagnostic === verdict.diagnostic
          ) {
            return { _tag: "Ignored", reason: `already ${row.feedback_type}` } as const
          }
          const at = new Date(Number(yield* Clock.currentTimeMillis))
          yield* db.query(
            `UPDATE outbound_recipients
                SET feedback_type = $2, feedback_smtp_code = $3, feedback_diagnostic = $4, feedback_at = $5, updated_at = $5
              WHERE id = $1`,
            [row.id, verdict.type, verdict.smtpCode, verdict.diagnostic, at],
          )
          const suppressed = verdict.type !== "deferred"
          if (suppressed) {
            yield* db.query(
              `INSERT INTO suppressions (user_id, email, reason, provider_code, message_id, created_at)
               VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (user_id, email) DO NOTHING`,
              [row.user_id, row.email.toLowerCase(), verdict.type, verdict.code, intake.recipient.emailId, at],
            )
          }
          yield* events.emit(row.user_id, [{
            event: EVENT[verdict.type],
            email_id: intake.recipient.emailId,
            recipient: row.email,
            status: verdict.type,
            smtp_code: verdict.smtpCode,
            diagnostic: verdict.diagnostic,
          }])
          return {
            _tag: "Recorded",
            emailId: intake.recipient.emailId,
            recipient: row.email,
            type: verdict.type,
            smtpCode: verdict.smtpCode,
            diagnostic: verdict.diagnostic,
            suppressed,
          } as const
        }))
        if (outcome._tag === "Recorded") yield* events.wake
        yield* Effect.logInfo(`bounce intake: ${outcome._tag === "Recorded" ? outcome.type : `ignored (${outcome.reason})`}`).pipe(
          Effect.annotateLogs({ outbound_message_id: intake.recipient.emailId, recipient_index: intake.recipient.recipientIndex, mail_from: intake.mailFrom }),
        )
        return outcome as BounceOutcome
      })

      return Bounces.of({ isReturnPath: (address) => looksLikeReturnPath(key, address), parseReturnPath, process })
    }),
  )
}
