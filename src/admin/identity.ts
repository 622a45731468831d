/** Operator commands that switch an account off and on, or vouch for its identity. */
import { Console, Effect } from "effect"
import { Accounts } from "../../effects/accounts/service.ts"
import { ValidationError } from "../../effects/errors.ts"
import type { AdminCommand } from "./command.ts"

const accountId = (args: ReadonlyArray<string>) => {
  const id = Number(args[0])
  return Number.isSafeInteger(id) && id > 0
    ? Effect.succeed(id)
    : Effect.fail(ValidationError.field("ID", "expected the account id (a positive integer); see `accounts`"))
}

export const disableAccount: AdminCommand = {
  name: "disable-account",
  usage: "disable-account ID",
  summary: "disable an account: its keys and tokens answer 403 ACCOUNT_DISABLED at once",
  run: (args) =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const user = yield* accounts.setDisabled(yield* accountId(args), true)
      yield* Console.log(`account ${user.id} disabled`)
      return user
    }),
}

export const enableAccount: AdminCommand = {
  name: "enable-account",
  usage: "enable-account ID",
  summary: "enable a disabled account again",
  run: (args) =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const user = yield* accounts.setDisabled(yield* accountId(args), false)
      yield* Console.log(`account ${user.id} enabled`)
      return user
    }),
}

export const verifyIdentity: AdminCommand = {
  name: "verify-identity",
  usage: "verify-identity ID",
  summary: "mark the account's email and phone (those it has) as verified",
  run: (args) =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const user = yield* accounts.verifyIdentity(yield* accountId(args))
      yield* Console.log(`account ${user.id}: email_verified=${user.email_verified} phone_verified=${user.phone_verified}`)
      return user
    }),
}
