/** Operator commands about the wallet (DECISIONS.md "Operator CLI"). */
import { Console, Effect } from "effect"
import { Billing } from "../../effects/billing/service.ts"
import { Database } from "../../effects/ports/Database.ts"
import type { AdminCommand } from "./command.ts"

/** An operator's failure message, printed as `error: …` by src/admin.ts. */
const usage = (message: string) => Effect.fail({ message })

export const creditAccount: AdminCommand = {
  name: "credit",
  usage: "credit ID AMOUNT --reason TEXT",
  summary: "add AMOUNT TZS to an account's wallet (ledger entry of kind adjustment)",
  run: (args, flags) =>
    Effect.gen(function*() {
      const [idArg, amountArg] = args
      const userId = Number(idArg)
      const amount = Number(amountArg)
      const reason = (flags.reason ?? "").trim()
      if (!/^\d+$/.test(idArg ?? "") || !Number.isSafeInteger(userId) || userId < 1) {
        return yield* usage("ID must be an account id (see `accounts`)")
      }
      if (!/^\d+$/.test(amountArg ?? "") || !Number.isSafeInteger(amount) || amount < 1) {
        return yield* usage("AMOUNT must be a positive whole number of TZS")
      }
      // The reason is the audit trail of a manual money movement: never optional.
      if (reason === "") return yield* usage("--reason TEXT is required")
      const db = yield* Database
      const [user] = yield* db.query<{ id: number }>("SELECT id FROM users WHERE id = $1", [userId])
      if (!user) return yield* usage(`no account ${userId}`)
      const billing = yield* Billing
      const entry = yield* billing.credit({ userId, amount, kind: "adjustment", reference: { type: "operator" }, description: reason })
      yield* Console.log(JSON.stringify(
        { entry_id: entry.id, user_id: userId, kind: entry.kind, amount_tzs: entry.amount_tzs, balance_tzs: entry.balance_after_tzs, description: reason },
        null,
        2,
      ))
      return entry
    }),
}
