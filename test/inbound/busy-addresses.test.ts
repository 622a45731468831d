/**
 * Which batches the ingest writer tries as one statement (effects/ingest/busy-addresses.ts): every
 * address is quiet until a batch with it needed its subscribers; a quiet transaction frees the
 * batch's addresses again; the memory of busy addresses is bounded.
 */
import { describe, expect, it } from "vitest"
import { busyAddresses, MAX_BUSY_ADDRESSES } from "../../effects/ingest/busy-addresses.ts"
import type { Prepared } from "../../effects/ingest/store.ts"

const batchTo = (...ids: ReadonlyArray<ReadonlyArray<number>>): Array<Prepared> =>
  ids.map((copies) => ({
    destinations: copies.map((id) => ({ addressId: id, userId: 1, email: `a${id}@x`, retentionDays: 30, rcpt: `a${id}@x` })),
    message: {} as Prepared["message"],
    at: new Date(0),
  }))

describe("busy addresses", () => {
  it("marks a batch's addresses busy when it needed its subscribers, and frees them when a batch of theirs did not", () => {
    const busy = busyAddresses()
    expect(busy.quiet(batchTo([1], [2, 3]))).toBe(true)
    busy.learn(batchTo([1], [2]), false)
    expect(busy.quiet(batchTo([3]))).toBe(true)
    // Any copy of any message to a busy address makes the batch take the transaction.
    expect(busy.quiet(batchTo([3], [4, 2]))).toBe(false)
    busy.learn(batchTo([2]), true)
    expect(busy.quiet(batchTo([2], [3]))).toBe(true)
    expect(busy.quiet(batchTo([1]))).toBe(false)
  })

  it("forgets everything past its bound instead of growing", () => {
    const busy = busyAddresses()
    busy.learn(batchTo(Array.from({ length: MAX_BUSY_ADDRESSES }, (_, i) => i)), false)
    expect(busy.quiet(batchTo([0]))).toBe(false)
    busy.learn(batchTo([MAX_BUSY_ADDRESSES]), false)
    expect(busy.quiet(batchTo([0], [MAX_BUSY_ADDRESSES]))).toBe(true)
  })
})
