/** Every operator command; a capability adds its commands here. */
import { listAccounts } from "./accounts.ts"
import { creditAccount } from "./billing.ts"
import type { AdminCommand } from "./command.ts"

export const commands: ReadonlyArray<AdminCommand> = [
  listAccounts,
  creditAccount,
]
