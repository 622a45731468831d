/**
 * Which batches try the one-statement commit (./store.ts `commitAlone`): those to addresses not
 * known to have follow-up work (a webhook, an event endpoint, an SMS rule, an agent). It is only a
 * guess that saves a round trip: the statement itself checks the subscriptions and writes nothing
 * when one applies, so a wrong guess costs one round trip and never a missed delivery.
 *
 * An address is marked busy when a batch holding it turned out to need its subscribers (the
 * statement said so, or the transaction's question found some), and unmarked when a transaction
 * of its found none. Batch-mates of a busy address are marked with it (which of them has the
 * subscription is not asked) and come free again the next time they commit without it.
 */
import type { Prepared } from "./store.ts"

/** Addresses kept at most; past it everything is forgotten (each then costs one wasted try at most). */
export const MAX_BUSY_ADDRESSES = 10_000

export const busyAddresses = () => {
  const busy = new Set<number>()
  return {
    /** No address of the batch is known to have follow-up work: try the one statement. */
    quiet: (batch: ReadonlyArray<Prepared>): boolean => batch.every((p) => p.destinations.every((d) => !busy.has(d.addressId))),
    /** What committing the batch found out about its addresses' subscriptions. */
    learn: (batch: ReadonlyArray<Prepared>, quiet: boolean) => {
      for (const p of batch) {
        for (const d of p.destinations) {
          if (quiet) busy.delete(d.addressId)
          else busy.add(d.addressId)
        }
      }
      if (busy.size > MAX_BUSY_ADDRESSES) busy.clear()
    },
  }
}
