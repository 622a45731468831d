/** Operator commands that switch an account off and on, or vouch for its identity. */
import { Console, Effect } from "effect"
import { Accounts } from "../../effects/accounts/service.ts"
import type { User } from "../../effects/accounts/schema.ts"
import type { DbError } from "../../effects/ports/Database.ts"
import { type NotFound, ValidationError } from "../../effects/errors.ts"
import type { AdminCommand } from "./command.ts"

const accountId = (args: ReadonlyArray<string>) => {
  const id = Number(args[0])
  return Number.isSafeInteger(id) && id > 0
    ? Effect.succeed(id)
    : Effect.fail(ValidationError.field("ID", "expected the account id (a positive integer); see `accounts`"))
}

/** A command on one account (`NAME ID`): applies `change`, prints `report` of the result. */
const onAccount = (
  name: string,
  summary: string,
  change: (accounts: Accounts["Service"], id: number) => Effect.Effect<User, NotFound | DbError>,
  report: (user: User) => string,
): AdminCommand => ({
  name,
  usage: `${name} ID`,
  summary,
  run: (args) =>
    Effect.gen(function*() {
      const id = yield* accountId(args)
      const user = yield* change(yield* Accounts, id)
      yield* Console.log(report(user))
      return user
    }),
})

export const disableAccount = onAccount(
  "disable-account",
  "disable an account: its keys and tokens answer 403 ACCOUNT_DISABLED at once",
  (accounts, id) => accounts.setDisabled(id, true),
  (user) => `account ${user.id} disabled`,
)

export const enableAccount = onAccount(
  "enable-account",
  "enable a disabled account again",
  (accounts, id) => accounts.setDisabled(id, false),
  (user) => `account ${user.id} enabled`,
)

export const verifyIdentity = onAccount(
  "verify-identity",
  "mark the account's email and phone (those it has) as verified",
  (accounts, id) => accounts.verifyIdentity(id),
  (user) => `account ${user.id}: email_verified=${user.email_verified} phone_verified=${user.phone_verified}`,
)
