/**
 * The PGlite thread's wire encoding (src/db/pg-wire.ts) against PGlite's own serializer: the same
 * bytes for every text value (any Unicode, empty, NULL, long), and bytea values in binary format
 * that PostgreSQL stores as the same bytes.
 */
import { PGlite, protocol } from "@electric-sql/pglite"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bindExecuteSync } from "../../src/db/pg-wire.ts"
import { namedStatements } from "../../src/db/pglite-statements.ts"

const theirs = (name: string, values: Array<string | null>) => {
  const parts = [protocol.serialize.bind({ statement: name, values }), protocol.serialize.execute({}), protocol.serialize.sync()]
  return Buffer.concat(parts.map((p) => Buffer.from(p)))
}

describe("the Bind/Execute/Sync encoding", () => {
  it("is byte for byte PGlite's own for text and NULL values", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 20 }),
        fc.array(fc.option(fc.string({ unit: "grapheme", maxLength: 200 }), { nil: null }), { maxLength: 12 }),
        (name, values) => {
          expect(Buffer.from(bindExecuteSync(name, values))).toEqual(theirs(name, values))
        },
      ),
    )
    const long = "x✓😀".repeat(100_000)
    expect(Buffer.from(bindExecuteSync("app_1", [long, null, ""]))).toEqual(theirs("app_1", [long, null, ""]))
  })

  it("sends bytes in binary format, stored as the same bytes, through PGlite's named statements", async () => {
    const pg = await PGlite.create()
    try {
      await pg.exec("CREATE TABLE b (id serial PRIMARY KEY, v bytea, t text)")
      const s = namedStatements(pg)
      const bytes = new Uint8Array(300_000).map((_, i) => (i * 7) % 256)
      await s.query("INSERT INTO b (v, t) VALUES ($1, $2)", [bytes, "ü"])
      await s.query("INSERT INTO b (v, t) VALUES ($1, $2)", [new Uint8Array(0), null])
      const rows = (await pg.query<{ v: Uint8Array; t: string | null; n: number }>("SELECT v, t, length(v) AS n FROM b ORDER BY id")).rows
      expect(rows.map((r) => [r.n, r.t])).toEqual([[300_000, "ü"], [0, null]])
      expect(Buffer.from(rows[0]!.v).equals(Buffer.from(bytes))).toBe(true)
      // A bytea parameter compared in SQL, not only stored.
      expect(await s.query("SELECT id FROM b WHERE v = $1", [bytes])).toEqual([{ id: 1 }])
    } finally {
      await pg.close()
    }
  })
})
