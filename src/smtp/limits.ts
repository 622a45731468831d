/**
 * Resource limits of the SMTP servers (DECISIONS.md "Hostile input"): concurrent sessions per
 * client IP, and a process-wide cap on message bytes held in memory, shared by the MX and the
 * sandbox so 1,000 clients sending 25 MiB each cannot take the process down.
 */
import { Context, Effect, Layer } from "effect"
import type { SMTPServerSession } from "smtp-server"
import { AppConfig } from "../../effects/config.ts"
import { plainIp } from "../../effects/ingest/trace.ts"
import { reply, type SmtpReply } from "./common.ts"

/**
 * Bytes of message data held in memory. A DATA starts only if its first bytes' room fits
 * (otherwise 451 4.3.1); receiving buffers take from it without waiting (and spool to disk when
 * it says no); handling a large spooled message waits its turn, so at most `capacity` bytes of
 * messages are being worked on at once.
 */
export class MemoryBudget {
  readonly capacity: number
  #used = 0
  readonly #waiting: Array<{ readonly bytes: number; readonly go: () => void }> = []

  constructor(capacity: number) {
    this.capacity = capacity
  }

  get used(): number {
    return this.#used
  }

  /** Takes `bytes` if they fit now. */
  tryTake(bytes: number): boolean {
    if (this.#waiting.length > 0 || this.#used + bytes > this.capacity) return false
    this.#used += bytes
    return true
  }

  /** Waits until `bytes` fit (a request larger than the cap waits for an empty budget); returns what was taken. */
  take(bytes: number): Promise<number> {
    const n = Math.min(bytes, this.capacity)
    if (this.tryTake(n)) return Promise.resolve(n)
    return new Promise((resolve) => this.#waiting.push({ bytes: n, go: () => resolve(n) }))
  }

  release(bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes)
    // First come, first served: a large waiter is not overtaken forever by small ones.
    while (this.#waiting.length > 0 && this.#used + this.#waiting[0]!.bytes <= this.capacity) {
      const next = this.#waiting.shift()!
      this.#used += next.bytes
      next.go()
    }
  }
}

/** The process's one memory budget, shared by every SMTP server of the runtime. */
export class SmtpMemory extends Context.Service<SmtpMemory, MemoryBudget>()("app/SmtpMemory") {
  static readonly layer = Layer.effect(
    SmtpMemory,
    Effect.gen(function*() {
      const config = yield* AppConfig
      return new MemoryBudget(config.smtpMemoryBytes)
    }),
  )
}

export const MEMORY_FULL = reply(451, "4.3.1 Insufficient system resources, try again later")
export const TOO_MANY_SESSIONS = reply(421, "4.7.0 Too many connections from your address, try again later")

/** Counts open sessions per client IP (one server); the one over `max` is refused with 421 4.7.0. */
export const sessionsPerIp = (max: number) => {
  const open = new Map<string, number>()
  const counted = new Set<string>()
  return {
    /** Null when the session may go on; it is then counted until `leave`. */
    enter: (session: SMTPServerSession): SmtpReply | null => {
      const ip = plainIp(session.remoteAddress)
      const n = open.get(ip) ?? 0
      if (n >= max) return TOO_MANY_SESSIONS
      open.set(ip, n + 1)
      counted.add(session.id)
      return null
    },
    /** Every closed session passes here, refused ones too; only counted ones are taken off. */
    leave: (session: SMTPServerSession): void => {
      if (!counted.delete(session.id)) return
      const ip = plainIp(session.remoteAddress)
      const n = (open.get(ip) ?? 1) - 1
      if (n > 0) open.set(ip, n)
      else open.delete(ip)
    },
    openFrom: (ip: string): number => open.get(plainIp(ip)) ?? 0,
  }
}
