/** Every operator command; a capability adds its commands here. */
import { listAccounts } from "./accounts.ts"
import { creditAccount } from "./billing.ts"
import type { AdminCommand } from "./command.ts"
import { disableAccount, enableAccount, verifyIdentity } from "./identity.ts"

export const commands: ReadonlyArray<AdminCommand> = [
  listAccounts,
  disableAccount,
  enableAccount,
  verifyIdentity,
  creditAccount,
]
