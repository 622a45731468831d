/**
 * Resource limits of the SMTP servers (DECISIONS.md "Hostile input"): concurrent sessions per
 * client IP, and a process-wide cap on message bytes held in memory, shared by the MX and the
 * sandbox so 1,000 clients sending 25 MiB each cannot take the process down. The limits
 * themselves are in ./budget.ts (free of Effect, for the MX's thread); here the budget is the
 * runtime's service.
 */
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { MemoryBudget } from "./budget.ts"

export { MEMORY_FULL, MemoryBudget, sessionsPerIp, TOO_MANY_SESSIONS } from "./budget.ts"

/** The process's one memory budget, shared by every SMTP server of the runtime (and the MX's thread). */
export class SmtpMemory extends Context.Service<SmtpMemory, MemoryBudget>()("app/SmtpMemory") {
  static readonly layer = Layer.effect(
    SmtpMemory,
    Effect.gen(function*() {
      const config = yield* AppConfig
      return new MemoryBudget(config.smtpMemoryBytes)
    }),
  )
}
