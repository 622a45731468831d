/**
 * The wallet: owns every TZS that moves. Other capabilities call `charge` / `refund` inside
 * their own transaction (the Database port's transactions are ambient), so a message and its
 * debit commit or roll back together. The balance row is updated only by a conditional
 * statement (`balance_tzs >= amount`), which makes overdraft impossible under any concurrency:
 * PostgreSQL re-checks the condition after taking the row lock.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { InsufficientBalance, ValidationError } from "../errors.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { inList } from "../shared/values.ts"
import { BalanceRow, LedgerEntry, type LedgerKind } from "./schema.ts"
import { newestFirst } from "../shared/pages.ts"

// Every balance and ledger row is decoded (queryAs): money is never read through a bare cast.
const WalletRow = Schema.Struct({ user_id: Schema.Int, balance_tzs: BalanceRow.fields.balance_tzs })
const DebitedRow = Schema.Struct({ user_id: Schema.Int })

/** Flat price per inbound message and per outbound recipient (SPEC.md "Pricing"). */
export const PRICE_PER_MESSAGE_TZS = 5

/** What caused a ledger entry, e.g. `{ type: "outbound_message", id: 42 }`. */
export interface Reference {
  readonly type: string
  readonly id?: string | number | null
}

export interface Movement {
  readonly userId: number
  /** Positive whole TZS. */
  readonly amount: number
  readonly reference: Reference
  readonly description?: string
}

export interface BillingShape {
  readonly balance: (userId: number) => Effect.Effect<number, DbError>
  /** Debits `amount`; fails INSUFFICIENT_BALANCE (writing nothing) if the wallet cannot cover it. */
  readonly charge: (m: Movement) => Effect.Effect<LedgerEntry, InsufficientBalance | ValidationError | DbError>
  /** Gives back (part of) an earlier charge. */
  readonly refund: (m: Movement) => Effect.Effect<LedgerEntry, ValidationError | DbError>
  /** Adds money: `credit` for a completed top-up, `adjustment` for an operator correction. */
  readonly credit: (m: Movement & { readonly kind: "credit" | "adjustment" }) => Effect.Effect<LedgerEntry, ValidationError | DbError>
  /**
   * Locks the wallets of `userIds` until the surrounding transaction ends, in user id order (so
   * two callers never deadlock), and returns their balances; an account without a wallet has 0.
   */
  readonly lockBalances: (userIds: ReadonlyArray<number>) => Effect.Effect<ReadonlyMap<number, number>, DbError>
  /**
   * Many debits inside the caller's transaction, after `lockBalances` of their accounts, in one
   * statement: a conditional update per account (its total) and one ledger entry per movement,
   * each with the balance after it. An account that cannot cover its total fails
   * INSUFFICIENT_BALANCE; the caller's transaction must then roll back.
   */
  readonly chargeMany: (movements: ReadonlyArray<Movement>) => Effect.Effect<void, InsufficientBalance | ValidationError | DbError>
  /** Ledger entries, newest first. */
  readonly entries: (
    userId: number,
    page: { readonly limit: number; readonly offset: number },
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<LedgerEntry>; readonly total: number }, DbError>
}

const positive = (amount: number) =>
  Number.isSafeInteger(amount) && amount > 0
    ? Effect.void
    : Effect.fail(ValidationError.field("amount_tzs", "amount must be a positive whole number of TZS"))

export class Billing extends Context.Service<Billing, BillingShape>()("app/Billing") {
  static readonly layer = Layer.effect(
    Billing,
    Effect.gen(function*() {
      const db = yield* Database

      const record = (userId: number, kind: LedgerKind, signed: number, balanceAfter: number, m: Movement) =>
        queryAs(
          db,
          LedgerEntry,
          `INSERT INTO ledger_entries (user_id, kind, amount_tzs, balance_after_tzs, reference_type, reference_id, description)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
          [userId, kind, signed, balanceAfter, m.reference.type, m.reference.id == null ? null : String(m.reference.id), m.description ?? ""],
        ).pipe(Effect.map((rows) => rows[0]!))

      const balance = (userId: number) =>
        queryAs(db, BalanceRow, "SELECT balance_tzs FROM wallets WHERE user_id = $1", [userId]).pipe(
          Effect.map((rows) => rows[0]?.balance_tzs ?? 0),
        )

      const add = (kind: LedgerKind, m: Movement) =>
        Effect.gen(function*() {
          yield* positive(m.amount)
          return yield* db.transaction(Effect.gen(function*() {
            const [row] = yield* queryAs(
              db,
              BalanceRow,
              `INSERT INTO wallets (user_id, balance_tzs) VALUES ($1, $2)
               ON CONFLICT (user_id) DO UPDATE SET balance_tzs = wallets.balance_tzs + EXCLUDED.balance_tzs, updated_at = now()
               RETURNING balance_tzs`,
              [m.userId, m.amount],
            )
            return yield* record(m.userId, kind, m.amount, row!.balance_tzs, m)
          }))
        })

      const charge = Effect.fn("Billing.charge")(function*(m: Movement) {
        yield* positive(m.amount)
        return yield* db.transaction(Effect.gen(function*() {
          const [row] = yield* queryAs(
            db,
            BalanceRow,
            `UPDATE wallets SET balance_tzs = balance_tzs - $2, updated_at = now()
              WHERE user_id = $1 AND balance_tzs >= $2 RETURNING balance_tzs`,
            [m.userId, m.amount],
          )
          if (!row) {
            const current = yield* balance(m.userId)
            return yield* new InsufficientBalance({
              message: `this costs ${m.amount} TZS and the wallet holds ${current} TZS`,
              required_tzs: m.amount,
              balance_tzs: current,
            })
          }
          return yield* record(m.userId, "debit", -m.amount, row.balance_tzs, m)
        }))
      })

      const entries = newestFirst(db, "ledger_entries", "user_id", LedgerEntry)

      const lockBalances = Effect.fn("Billing.lockBalances")(function*(userIds: ReadonlyArray<number>) {
        const ids = [...new Set(userIds)].sort((a, b) => a - b)
        const balances = new Map<number, number>(ids.map((id) => [id, 0]))
        if (ids.length === 0) return balances
        const rows = yield* queryAs(
          db,
          WalletRow,
          `SELECT user_id, balance_tzs FROM wallets WHERE user_id IN (${inList(ids.length, "int8")}) ORDER BY user_id FOR UPDATE`,
          ids,
        )
        for (const r of rows) balances.set(r.user_id, r.balance_tzs)
        return balances
      })

      const chargeMany = Effect.fn("Billing.chargeMany")(function*(movements: ReadonlyArray<Movement>) {
        if (movements.length === 0) return
        yield* Effect.forEach(movements, (m) => positive(m.amount), { discard: true })
        const totals = new Map<number, number>()
        for (const m of movements) totals.set(m.userId, (totals.get(m.userId) ?? 0) + m.amount)
        // Each entry's balance_after is the account's final balance plus what its later entries take.
        const later = new Map<number, number>()
        const entries = movements.map((m, ord) => ({
          ord,
          user_id: m.userId,
          amount: m.amount,
          reference_type: m.reference.type,
          reference_id: m.reference.id == null ? null : String(m.reference.id),
          description: m.description ?? "",
        }))
        for (let i = entries.length - 1; i >= 0; i--) {
          const e = entries[i]!
          Object.assign(e, { later: later.get(e.user_id) ?? 0 })
          later.set(e.user_id, (later.get(e.user_id) ?? 0) + e.amount)
        }
        const written = yield* queryAs(
          db,
          DebitedRow,
          `WITH debit AS (
             UPDATE wallets w SET balance_tzs = w.balance_tzs - t.amount, updated_at = now()
               FROM json_to_recordset($1::json) AS t (user_id int8, amount int8)
              WHERE w.user_id = t.user_id AND w.balance_tzs >= t.amount
             RETURNING w.user_id, w.balance_tzs)
           INSERT INTO ledger_entries (user_id, kind, amount_tzs, balance_after_tzs, reference_type, reference_id, description)
           SELECT e.user_id, 'debit', -e.amount, d.balance_tzs + e.later, e.reference_type, e.reference_id, e.description
             FROM json_to_recordset($2::json)
               AS e (ord int4, user_id int8, amount int8, later int8, reference_type text, reference_id text, description text)
             JOIN debit d ON d.user_id = e.user_id
            ORDER BY e.ord
           RETURNING user_id`,
          [JSON.stringify([...totals].map(([user_id, amount]) => ({ user_id, amount }))), JSON.stringify(entries)],
        )
        const debited = new Set(written.map((r) => r.user_id))
        const short = [...totals].find(([userId]) => !debited.has(userId))
        if (short) {
          const current = yield* balance(short[0])
          return yield* new InsufficientBalance({
            message: `this costs ${short[1]} TZS and the wallet holds ${current} TZS`,
            required_tzs: short[1],
            balance_tzs: current,
          })
        }
      })

      return Billing.of({
        balance,
        charge,
        lockBalances,
        chargeMany,
        refund: Effect.fn("Billing.refund")((m: Movement) => add("refund", m)),
        credit: Effect.fn("Billing.credit")((m: Movement & { kind: "credit" | "adjustment" }) => add(m.kind, m)),
        entries,
      })
    }),
  )
}
