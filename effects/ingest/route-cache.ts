/**
 * What RCPT lookups found, kept briefly (./recipients.ts): routes by the spelling looked up, and
 * balances by account, each with its own expiry on the caller's clock.
 *
 * Bounded: a mailbox has endless spellings (`info+<anything>@`, any letter case), so a sender
 * varying them must not grow the process. Past `max` routes (or balances) the oldest kept goes.
 */
export interface KeptRoute<R> {
  readonly row: R
  readonly balance: number
}

/** `R`: a lookup's row: the address (`id`), its owner (`user_id`) and the owner's balance then. */
export const makeRouteCache = <R extends { readonly id: number; readonly user_id: number; readonly balance: number }>(max: number) => {
  const routes = new Map<string, { until: number; readonly row: R }>()
  /** Address id → the keys of `routes` that reach it. */
  const keysOf = new Map<number, Set<string>>()
  const balances = new Map<number, { readonly until: number; readonly balance: number }>()

  const forget = (key: string) => {
    const route = routes.get(key)
    if (!route) return
    routes.delete(key)
    const keys = keysOf.get(route.row.id)
    keys?.delete(key)
    if (keys?.size === 0) keysOf.delete(route.row.id)
  }
  const setBalance = (userId: number, balance: number, until: number) => {
    balances.delete(userId)
    balances.set(userId, { until, balance })
    if (balances.size > max) balances.delete(balances.keys().next().value!)
  }

  return {
    /** The route kept for `key` with its owner's balance, when both are still fresh at `now`. */
    get: (key: string, now: number): KeptRoute<R> | undefined => {
      const route = routes.get(key)
      if (!route || route.until <= now) return undefined
      const balance = balances.get(route.row.user_id)
      return balance && balance.until > now ? { row: route.row, balance: balance.balance } : undefined
    },
    /** Keeps what a lookup of `key` found, until `until`. */
    keep: (key: string, row: R, until: number) => {
      forget(key)
      routes.set(key, { until, row })
      const keys = keysOf.get(row.id) ?? new Set()
      keysOf.set(row.id, keys.add(key))
      setBalance(row.user_id, row.balance, until)
      while (routes.size > max) forget(routes.keys().next().value!)
    },
    /**
     * What a commit found under its locks: the balances it left, and the addresses it stored
     * copies for (they still route); both kept until `until`.
     */
    settle: (settled: ReadonlyArray<{ readonly userId: number; readonly balance: number }>, addressIds: ReadonlyArray<number>, until: number) => {
      for (const { userId, balance } of settled) setBalance(userId, balance, until)
      for (const id of addressIds) {
        for (const key of keysOf.get(id) ?? []) routes.get(key)!.until = until
      }
    },
    clear: () => {
      routes.clear()
      keysOf.clear()
      balances.clear()
    },
    /** Routes kept (tests). */
    size: () => routes.size,
  }
}
