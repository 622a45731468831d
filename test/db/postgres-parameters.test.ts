/**
 * A statement's parameters are let go once it settled (src/db/postgres.ts `statementRunner`):
 * postgres.js keeps its Query objects reachable for a while, and what they hold of a large
 * parameter (an MX batch is ~70 KB of text) was promoted to the old generation with them. The
 * Query the driver made is caught here on its way out of `unsafe`, on a real server.
 */
import postgres from "postgres"
import { describe, expect, it } from "vitest"
import { statementRunner } from "../../src/db/postgres.ts"
import { onPostgres, testDatabaseUrl } from "../support/db.ts"

/** A postgres.js client whose `unsafe` hands each Query it makes to `seen` as well. */
const watched = (sql: postgres.Sql, seen: Array<{ args: Array<unknown>; parameters: Array<unknown> }>) => ({
  unsafe: ((...args: Parameters<postgres.Sql["unsafe"]>) => {
    const query = sql.unsafe(...args)
    seen.push(query as unknown as { args: Array<unknown>; parameters: Array<unknown> })
    return query
  }) as postgres.Sql["unsafe"],
})

describe.skipIf(!onPostgres)("a statement's parameters on PostgreSQL", () => {
  it("answers as before and keeps none of its parameters once answered, prepared or not", async () => {
    // One connection: the temporary table is there for every statement.
    const sql = postgres(testDatabaseUrl!, { max: 1, onnotice: () => undefined })
    const seen: Array<{ args: Array<unknown>; parameters: Array<unknown> }> = []
    try {
      for (const prepared of [true, false]) {
        const run = statementRunner(watched(sql, seen), () => prepared)
        const big = "é".repeat(40_000)
        const params = [big, 7]
        const rows = await run("SELECT length($1::text) AS n, $2::int8 AS k", params)
        expect(rows).toEqual([{ n: 40_000, k: "7" }])
        const query = seen.at(-1)!
        expect(query.args).toEqual([])
        expect(query.parameters).toEqual([])
        // The caller's array is its own still: a retry sends the same parameters again.
        expect(params).toEqual([big, 7])
        expect(await run("SELECT length($1::text) AS n, $2::int8 AS k", params)).toEqual([{ n: 40_000, k: "7" }])
        // The same text again (a prepared statement's second run binds the new parameters).
        expect(await run("SELECT length($1::text) AS n, $2::int8 AS k", ["abc", 8])).toEqual([{ n: 3, k: "8" }])
      }
    } finally {
      await sql.end()
    }
  })

  it("lets go of them when the statement fails too, and a failure is still the driver's error", async () => {
    const sql = postgres(testDatabaseUrl!, { max: 1, onnotice: () => undefined })
    const seen: Array<{ args: Array<unknown>; parameters: Array<unknown> }> = []
    try {
      const run = statementRunner(watched(sql, seen), () => true)
      const failure = await run("SELECT $1::int AS n", ["not a number"]).then(() => undefined, (e: unknown) => e)
      expect((failure as { code?: string }).code).toBe("22P02")
      expect(seen.at(-1)!.args).toEqual([])
      expect(seen.at(-1)!.parameters).toEqual([])
    } finally {
      await sql.end()
    }
  })

  it("still has them when the server makes the driver run a prepared statement again", async () => {
    const sql = postgres(testDatabaseUrl!, { max: 1, onnotice: () => undefined })
    try {
      const run = statementRunner({ unsafe: sql.unsafe.bind(sql) as postgres.Sql["unsafe"] }, () => true)
      await sql.unsafe("CREATE TEMP TABLE params_retry (id int8 PRIMARY KEY, label text)")
      await sql.unsafe("INSERT INTO params_retry VALUES (1, 'one'), (2, 'two')")
      expect(await run("SELECT * FROM params_retry WHERE id = $1", [2])).toEqual([{ id: "2", label: "two" }])
      // The kept plan's result type changes: the server refuses it (RevalidateCachedQuery) and
      // postgres.js prepares and binds the same Query again, with its parameters.
      await sql.unsafe("ALTER TABLE params_retry ADD COLUMN extra text DEFAULT 'x'")
      expect(await run("SELECT * FROM params_retry WHERE id = $1", [2])).toEqual([{ id: "2", label: "two", extra: "x" }])
    } finally {
      await sql.end()
    }
  })
})
