/** Operator commands about accounts. */
import { Console, Effect } from "effect"
import { Database } from "../../effects/ports/Database.ts"
import type { AdminCommand } from "./command.ts"

export const listAccounts: AdminCommand = {
  name: "accounts",
  usage: "accounts",
  summary: "list accounts with their verification and disabled state",
  run: () =>
    Effect.gen(function*() {
      const db = yield* Database
      const rows = yield* db.query<Record<string, unknown>>(
        `SELECT id, name, email, phone_number, email_verified, phone_verified, disabled_at, created_at
           FROM users ORDER BY id`,
      )
      yield* Console.log(JSON.stringify(rows, null, 2))
    }),
}
