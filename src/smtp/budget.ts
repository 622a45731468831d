/**
 * The SMTP servers' resource limits that need no service (DECISIONS.md "Hostile input"): the
 * process-wide budget of message bytes held in memory, and the per-IP session count. Free of
 * Effect: the MX's protocol thread (./mx-thread.ts) runs them too.
 *
 * The budget is one count in a SharedArrayBuffer, so the MX's thread and the event loop (the
 * sandbox, and the MX when it runs there) take from and give back to the same SMTP_MEMORY_BYTES.
 */
import { plainIp } from "../../effects/ingest/trace.ts"
import type { SmtpAnswer } from "./smtp-error.ts"

export const MEMORY_FULL: SmtpAnswer = { code: 451, message: "4.3.1 Insufficient system resources, try again later" }
export const TOO_MANY_SESSIONS: SmtpAnswer = { code: 421, message: "4.7.0 Too many connections from your address, try again later" }

/** What reading DATA needs of a budget (./data.ts): a MemoryBudget, or a thread's share of one. */
export interface Budget {
  readonly capacity: number
  readonly used: number
  tryTake(bytes: number): boolean
  take(bytes: number): Promise<number>
  release(bytes: number): void
}

/** How long a waiter waits at most before it looks at the budget again (a missed wake-up costs no more). */
const RECHECK_MS = 1_000

/**
 * Bytes of message data held in memory. A DATA starts only if its first bytes' room fits
 * (otherwise 451 4.3.1); receiving buffers take from it without waiting (and spool to disk when
 * it says no); handling a large spooled message waits its turn, so at most `capacity` bytes of
 * messages are being worked on at once.
 *
 * `shared` holds the count (bytes 0–7) and a wake-up counter (bytes 8–11): another thread builds
 * its own MemoryBudget on the same buffer. Waiters queue per thread, first come first served;
 * a release on any thread bumps the wake-up counter, and a thread with waiters watches it
 * (Atomics.waitAsync) to serve them.
 */
export class MemoryBudget implements Budget {
  readonly capacity: number
  readonly shared: SharedArrayBuffer
  readonly #used: BigInt64Array
  readonly #wake: Int32Array
  readonly #waiting: Array<{ readonly bytes: number; readonly go: () => void }> = []
  #watching = false

  constructor(capacity: number, shared = new SharedArrayBuffer(16)) {
    this.capacity = capacity
    this.shared = shared
    this.#used = new BigInt64Array(shared, 0, 1)
    this.#wake = new Int32Array(shared, 8, 1)
  }

  get used(): number {
    return Number(Atomics.load(this.#used, 0))
  }

  /** Takes `bytes` if they fit now and no one on this thread waits before them. */
  tryTake(bytes: number): boolean {
    return this.#waiting.length === 0 && this.#grab(bytes)
  }

  /** Waits until `bytes` fit (a request larger than the cap waits for an empty budget); returns what was taken. */
  take(bytes: number): Promise<number> {
    const n = Math.min(bytes, this.capacity)
    if (this.tryTake(n)) return Promise.resolve(n)
    return new Promise((resolve) => {
      this.#waiting.push({ bytes: n, go: () => resolve(n) })
      this.#serve()
    })
  }

  release(bytes: number): void {
    if (bytes <= 0) return
    for (;;) {
      const now = Atomics.load(this.#used, 0)
      const after = now > BigInt(bytes) ? now - BigInt(bytes) : 0n
      if (Atomics.compareExchange(this.#used, 0, now, after) === now) break
    }
    Atomics.add(this.#wake, 0, 1)
    Atomics.notify(this.#wake, 0)
    this.#serve()
  }

  #grab(bytes: number): boolean {
    for (;;) {
      const now = Atomics.load(this.#used, 0)
      if (Number(now) + bytes > this.capacity) return false
      if (Atomics.compareExchange(this.#used, 0, now, now + BigInt(bytes)) === now) return true
    }
  }

  /** Lets this thread's waiters in, in order, while they fit; watches for releases while one waits. */
  #serve(): void {
    while (this.#waiting.length > 0) {
      // Read before trying: a release after a failed try changes it, and the watch returns at once.
      const seen = Atomics.load(this.#wake, 0)
      if (!this.#grab(this.#waiting[0]!.bytes)) return this.#watch(seen)
      this.#waiting.shift()!.go()
    }
  }

  #watch(seen: number): void {
    if (this.#watching) return
    this.#watching = true
    const again = () => {
      this.#watching = false
      this.#serve()
    }
    const waited = Atomics.waitAsync(this.#wake, 0, seen, RECHECK_MS)
    if (waited.async) void waited.value.then(again)
    else queueMicrotask(again)
  }
}

/**
 * A thread's share of a MemoryBudget: what it holds is also counted in `held` (a slot of a
 * SharedArrayBuffer of its own), so when the thread dies its host gives back what it left held.
 * `handOver` moves bytes to whoever takes the message (they release them on the budget itself).
 */
export class ThreadBudget implements Budget {
  readonly #budget: MemoryBudget
  readonly #held: BigInt64Array

  constructor(budget: MemoryBudget, held: SharedArrayBuffer) {
    this.#budget = budget
    this.#held = new BigInt64Array(held, 0, 1)
  }

  get capacity(): number {
    return this.#budget.capacity
  }

  get used(): number {
    return this.#budget.used
  }

  tryTake(bytes: number): boolean {
    if (!this.#budget.tryTake(bytes)) return false
    Atomics.add(this.#held, 0, BigInt(bytes))
    return true
  }

  async take(bytes: number): Promise<number> {
    const n = await this.#budget.take(bytes)
    Atomics.add(this.#held, 0, BigInt(n))
    return n
  }

  release(bytes: number): void {
    this.handOver(bytes)
    this.#budget.release(bytes)
  }

  /** No longer this thread's to give back (a message posted with them). */
  handOver(bytes: number): void {
    if (bytes > 0) Atomics.sub(this.#held, 0, BigInt(bytes))
  }
}

/** What a thread's share left held (its host's side of `ThreadBudget`), taken back to 0. */
export const takeBackHeld = (held: SharedArrayBuffer): number => Number(Atomics.exchange(new BigInt64Array(held, 0, 1), 0, 0n))

/** Counts open sessions per client IP (one server); the one over `max` is refused with 421 4.7.0. */
export const sessionsPerIp = (max: number) => {
  const open = new Map<string, number>()
  const counted = new Set<string>()
  return {
    /** Null when the session may go on; it is then counted until `leave`. */
    enter: (session: { readonly id: string; readonly remoteAddress: string }): SmtpAnswer | null => {
      const ip = plainIp(session.remoteAddress)
      const n = open.get(ip) ?? 0
      if (n >= max) return TOO_MANY_SESSIONS
      open.set(ip, n + 1)
      counted.add(session.id)
      return null
    },
    /** Every closed session passes here, refused ones too; only counted ones are taken off. */
    leave: (session: { readonly id: string; readonly remoteAddress: string }): void => {
      if (!counted.delete(session.id)) return
      const ip = plainIp(session.remoteAddress)
      const n = (open.get(ip) ?? 1) - 1
      if (n > 0) open.set(ip, n)
      else open.delete(ip)
    },
    openFrom: (ip: string): number => open.get(plainIp(ip)) ?? 0,
  }
}
