import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { CHUNK_BODY_BYTES, groupsOf, heavyPage, INLINE_BODY_BYTES } from "../../effects/shared/heavy-pages.ts"

const row = (id: number, body_bytes: number) => ({ id, body_bytes })
const MiB = 1024 * 1024

describe("groupsOf", () => {
  it("keeps the rows in order and each group's heavy bodies within the budget, a larger row alone", () => {
    const rows = [row(1, 10), row(2, 3 * MiB), row(3, 10), row(4, 2 * MiB), row(5, 9 * MiB), row(6, 100), row(7, 1 * MiB), row(8, 1 * MiB)]
    const groups = groupsOf(rows, 4 * MiB)
    expect(groups.flat()).toEqual(rows)
    expect(groups.map((g) => g.map((r) => r.id))).toEqual([[1, 2, 3], [4], [5, 6], [7, 8]])
    for (const g of groups) {
      const heavy = g.filter((r) => r.body_bytes > INLINE_BODY_BYTES)
      const bytes = heavy.reduce((n, r) => n + r.body_bytes, 0)
      expect(bytes <= 4 * MiB || heavy.length === 1).toBe(true)
    }
  })

  it("is one group for light rows", () => {
    expect(groupsOf([row(1, 10), row(2, INLINE_BODY_BYTES)])).toEqual([[row(1, 10), row(2, INLINE_BODY_BYTES)]])
  })
})

describe("heavyPage", () => {
  const item = (r: { id: number }, b: string | undefined) => ({ id: r.id, body: b ?? "light" })

  it("answers a page of light rows at once, fetching nothing", () => {
    let asked = 0
    const page = heavyPage([row(1, 10), row(2, 20)], () => Effect.sync(() => (asked++, new Map<number, string>())), item)
    expect(page).toEqual({ data: [{ id: 1, body: "light" }, { id: 2, body: "light" }], more: [] })
    expect(asked).toBe(0)
  })

  it("fetches heavy bodies group by group, only when a group runs, and leaves out rows gone meanwhile", async () => {
    const asked: Array<ReadonlyArray<number>> = []
    const rows = [row(1, 10), row(2, CHUNK_BODY_BYTES), row(3, 10), row(4, CHUNK_BODY_BYTES / 2), row(5, 200 * 1024)]
    const page = heavyPage(rows, (ids) =>
      Effect.sync(() => {
        asked.push(ids)
        return new Map(ids.filter((id) => id !== 4).map((id) => [id, `heavy ${id}`]))
      }), item)
    expect(page.data).toEqual([])
    expect(page.more).toHaveLength(2)
    expect(asked).toEqual([])
    expect(await Effect.runPromise(page.more[0]!)).toEqual([{ id: 1, body: "light" }, { id: 2, body: "heavy 2" }, { id: 3, body: "light" }])
    expect(asked).toEqual([[2]])
    expect(await Effect.runPromise(page.more[1]!)).toEqual([{ id: 5, body: "heavy 5" }])
    expect(asked).toEqual([[2], [4, 5]])
  })

})
