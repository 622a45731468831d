/**
 * Named prepared statements on PGlite (src/db/pglite-statements.ts): the same rows, values and
 * errors as PGlite's own `query`, one name per statement text reused for every execution, and a
 * statement whose table changed shape run again rather than failed.
 */
import { PGlite } from "@electric-sql/pglite"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { namedStatements } from "../../src/db/pglite-statements.ts"

let pg: PGlite
beforeEach(async () => {
  pg = await PGlite.create({ parsers: { 20: (v: string) => Number(v), 1082: (v: string) => v } })
  await pg.exec("CREATE TABLE t (id serial PRIMARY KEY, k text UNIQUE, n int8, at timestamptz, b bytea, j jsonb, d date)")
})
afterEach(() => pg.close())

const prepared = async (text: string) => (await pg.query<{ name: string }>("SELECT name FROM pg_prepared_statements WHERE statement = $1", [text])).rows

describe.skipIf(process.env.TEST_DATABASE_URL !== undefined)("PGlite's named statements", () => {
  it("give the rows PGlite's own query gives, for every type the port uses, and bind each value by its parameter's type", async () => {
    const s = namedStatements(pg)
    const insert = "INSERT INTO t (k, n, at, b, j, d) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *"
    const values = ["a ✓", 9007199254740, new Date("2026-11-25T10:00:00Z"), new Uint8Array([0, 255]), JSON.stringify({ a: [1, "x"] }), "2026-01-02"]
    const mine = await s.query(insert, values)
    const theirs = (await pg.query(insert, ["b ✓", ...values.slice(1)])).rows
    expect(mine).toEqual([{ ...(theirs[0] as object), id: 1, k: "a ✓" }])
    expect(mine[0]).toMatchObject({ n: 9007199254740, at: new Date("2026-11-25T10:00:00Z"), b: new Uint8Array([0, 255]), j: { a: [1, "x"] }, d: "2026-01-02" })
    // NULL and no rows at all.
    expect(await s.query("SELECT $1::text AS x", [null])).toEqual([{ x: null }])
    expect(await s.query("DELETE FROM t WHERE k = $1", ["none"])).toEqual([])
  })

  it("parse a statement text once, under one name, however often it runs", async () => {
    const s = namedStatements(pg)
    const text = "SELECT count(*)::int8 AS n FROM t WHERE k = $1"
    for (const k of ["a", "b", "c"]) await s.query(text, [k])
    expect(await prepared(text)).toHaveLength(1)
    expect(s.size()).toBe(1)
  })

  it("fail with PGlite's error and SQLSTATE, keep nothing for a statement that does not parse, and go on", async () => {
    const s = namedStatements(pg)
    await s.query("INSERT INTO t (k) VALUES ($1)", ["dup"])
    await expect(s.query("INSERT INTO t (k) VALUES ($1)", ["dup"])).rejects.toMatchObject({ code: "23505", constraint: "t_k_key" })
    await expect(s.query("SELEC nothing", [])).rejects.toMatchObject({ code: "42601" })
    expect(s.size()).toBe(1)
    expect(await s.query("SELECT k FROM t", [])).toEqual([{ k: "dup" }])
  })

  it("run a statement again when its table changed shape since it was parsed", async () => {
    const s = namedStatements(pg)
    await s.query("INSERT INTO t (k) VALUES ($1)", ["x"])
    const text = "SELECT * FROM t WHERE k = $1"
    expect(Object.keys((await s.query(text, ["x"]))[0]!)).not.toContain("extra")
    await pg.exec("ALTER TABLE t ADD COLUMN extra text DEFAULT 'yes'")
    expect((await s.query(text, ["x"]))[0]).toMatchObject({ k: "x", extra: "yes" })
  })
})
