/** An operator command: `npm run admin -- <name> [args…]`. */
import type { Effect } from "effect"
import type { AppServices } from "../layers.ts"

export interface AdminCommand {
  readonly name: string
  readonly usage: string
  readonly summary: string
  /** Prints its result; fails with a message for the operator. Runs on the app's runtime (workers off). */
  readonly run: (args: ReadonlyArray<string>, flags: Readonly<Record<string, string>>) => Effect.Effect<unknown, unknown, AppServices>
}
