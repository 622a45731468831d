/**
 * The Database port on both engines: ambient transactions (join, commit, rollback on failure,
 * defect and interruption), SQLSTATE mapping, values normalised alike (bytes among them), and
 * migrations that two instances can start at once.
 */
import { Effect, Exit, Fiber } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Database, isUniqueViolation } from "../../effects/ports/Database.ts"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { makeDatabase } from "../../src/db/connection.ts"
import { loadMigrations, migrate } from "../../src/db/migrate.ts"
import { openPostgres } from "../../src/db/postgres.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { testDatabaseUrl } from "../support/db.ts"

let api: TestApp
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
  await api.run(Database.use((db) => db.exec("CREATE TABLE t_items (id bigserial PRIMARY KEY, name text UNIQUE NOT NULL)")))
})
afterAll(() => api.stop())

const count = (name: string) =>
  api.run(Database.use((db) => db.query<{ n: number }>("SELECT count(*)::int8 AS n FROM t_items WHERE name = $1", [name])))
    .then((r) => r[0]!.n)

const insert = (name: string) => Database.use((db) => db.query("INSERT INTO t_items (name) VALUES ($1)", [name]))

describe("Database port", () => {
  it("commits a transaction and lets nested transactions join it", async () => {
    await api.run(Database.use((db) => db.transaction(Effect.gen(function*() {
      yield* insert("a1")
      yield* db.transaction(insert("a2"))
    }))))
    expect(await count("a1")).toBe(1)
    expect(await count("a2")).toBe(1)
  })

  it("rolls back on failure, defect and interruption", async () => {
    const failing = await api.run(Effect.exit(Database.use((db) => db.transaction(Effect.gen(function*() {
      yield* insert("b1")
      return yield* Effect.fail("nope")
    })))))
    expect(Exit.isFailure(failing)).toBe(true)
    await api.run(Effect.exit(Database.use((db) => db.transaction(Effect.andThen(insert("b2"), Effect.die("boom"))))))
    await api.run(Effect.gen(function*() {
      const db = yield* Database
      const fiber = yield* Effect.forkChild(db.transaction(Effect.andThen(insert("b3"), Effect.never)))
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(fiber)
    }))
    for (const name of ["b1", "b2", "b3"]) expect(await count(name)).toBe(0)
    // The connection is usable afterwards (no transaction left open).
    await api.run(insert("b4"))
    expect(await count("b4")).toBe(1)
  })

  it("tells write watchers about writes to their tables, after commit too, including watchers added later", async () => {
    await api.run(Database.use((db) => db.exec("CREATE TABLE t_watched (id int8)")))
    const seen: Array<string> = []
    const write = "INSERT INTO t_watched (id) VALUES (1)"
    const watch = (name: string, tables: ReadonlyArray<string>) =>
      api.run(Database.use((db) => Effect.sync(() => db.watchWrites(tables, () => seen.push(name)))))
    const run = (text: string) => api.run(Database.use((db) => db.query(text)))
    await watch("items", ["t_items"])
    await run(write)
    await run("SELECT * FROM t_watched")
    expect(seen).toEqual([])
    // A statement text already matched once must still reach a watcher registered afterwards.
    await watch("watched", ["t_watched"])
    await run(write)
    expect(seen).toEqual(["watched", "watched"]) // when it runs and when it has answered
    seen.length = 0
    await api.run(Database.use((db) => db.transaction(db.query(write))))
    expect(seen).toEqual(["watched", "watched"]) // when it runs and after COMMIT
    seen.length = 0
    await run("SELECT * FROM t_watched")
    await run(write.replace("VALUES (1)", "VALUES (2)"))
    expect(seen).toEqual(["watched", "watched"])
  })

  it("keeps the SQLSTATE of a unique violation", async () => {
    await api.run(insert("c1"))
    const e = await api.run(Effect.flip(insert("c1")))
    expect(e.code).toBe("23505")
    expect(isUniqueViolation(e)).toBe(true)
  })

  it("normalises int8, date and jsonb the same on both engines", async () => {
    const [row] = await api.run(Database.use((db) =>
      db.query<Record<string, unknown>>("SELECT 9007199254740991::int8 AS big, '2024-02-29'::date AS d, $1::jsonb AS j, now() AS t", [
        JSON.stringify({ a: [1, "x"] }),
      ])
    ))
    expect(row).toMatchObject({ big: 9007199254740991, d: "2024-02-29", j: { a: [1, "x"] } })
    expect(row!.t).toBeInstanceOf(Date)
  })

  it("takes bytes as they are, whatever view holds them, and gives them back as bytes on both engines", async () => {
    const slab = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 256))
    // A view into the middle of a larger buffer: only its own bytes are the parameter.
    const view = slab.subarray(100, 200)
    const plain = new Uint8Array([0, 255, 92, 120, 0])
    const [row] = await api.run(Database.use((db) =>
      db.query<{ a: Uint8Array; b: Uint8Array; n: number }>("SELECT $1::bytea AS a, $2::bytea AS b, length($1::bytea) AS n", [view, plain])
    ))
    expect(row!.n).toBe(100)
    expect(Buffer.from(row!.a).equals(view)).toBe(true)
    expect(Buffer.from(row!.b).equals(Buffer.from(plain))).toBe(true)
  })

  it("gives back every byte of a parameter sent its engine's way (db.bytea), whatever view holds it", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 3000 }), fc.nat(40), fc.uint8Array({ maxLength: 50 }), async (bytes, offset, second) => {
        // The parameter is a view into the middle of a larger buffer; only its own bytes count.
        const slab = Buffer.alloc(offset + bytes.length + 7, 0xee)
        slab.set(bytes, offset)
        const view = slab.subarray(offset, offset + bytes.length)
        const [row] = await api.run(Database.use((db) => {
          const a = db.bytea(1, view)
          const b = db.bytea(2, second)
          return db.query<{ a: Uint8Array; b: Uint8Array; n: number }>(
            `SELECT ${a.sql} AS a, ${b.sql} AS b, length(${a.sql}) AS n`,
            [a.value, b.value],
          )
        }))
        expect(row!.n).toBe(bytes.length)
        expect(Buffer.from(row!.a).equals(Buffer.from(bytes))).toBe(true)
        expect(Buffer.from(row!.b).equals(Buffer.from(second))).toBe(true)
      }),
      { numRuns: 60 },
    )
  })

  it("takes over bytes handed over (db.bytea(n, bytes, true)): sent whole, the caller's copy gone; bytes not handed over stay", async () => {
    const bytes = new Uint8Array(64 * 1024).map((_, i) => i % 251)
    const expected = Buffer.from(bytes)
    const kept = new Uint8Array(4096).fill(7)
    const [row] = await api.run(Database.use((db) => {
      const a = db.bytea(1, bytes, true)
      const b = db.bytea(2, kept)
      return db.query<{ a: Uint8Array; b: Uint8Array }>(`SELECT ${a.sql} AS a, ${b.sql} AS b`, [a.value, b.value])
    }))
    expect(Buffer.from(row!.a).equals(expected)).toBe(true)
    expect(Buffer.from(row!.b).equals(Buffer.alloc(4096, 7))).toBe(true)
    // Moved to PGlite's thread, or freed once encoded for a PostgreSQL server: never read again here.
    expect(bytes.byteLength).toBe(0)
    expect(kept.byteLength).toBe(4096)
  })

  it("applies migrations once when two instances start together", async () => {
    if (!testDatabaseUrl) {
      // PGlite is single-process; the same code path is exercised on PostgreSQL in CI.
      const again = await api.run(migrate())
      expect(again).toEqual([])
      return
    }
    const schema = `m_${randomHexSync(6)}`
    const a = openPostgres({ url: testDatabaseUrl, searchPath: schema, max: 2 })
    const b = openPostgres({ url: testDatabaseUrl, searchPath: schema, max: 2 })
    try {
      await a.source.query(`CREATE SCHEMA ${schema}`)
      const run = (source: typeof a.source) => Effect.runPromise(Effect.provideService(migrate(), Database, makeDatabase(source)))
      const [ra, rb] = await Promise.all([run(a.source), run(b.source)])
      const all = loadMigrations().map((m) => m.version)
      expect([...ra, ...rb].sort()).toEqual(all)
      const rows = await a.source.query("SELECT count(*)::int8 AS n FROM schema_migrations")
      expect(rows[0]!.n).toBe(all.length)
    } finally {
      await a.source.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await a.close()
      await b.close()
    }
  })
})

describe("embedded database lock", () => {
  it("refuses a second process-level opener of the same DATA_DIR and frees it on close", async () => {
    const { openPglite } = await import("../../src/db/pglite.ts")
    const fs = await import("node:fs")
    const os = await import("node:os")
    const path = await import("node:path")
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lock-"))
    // A live foreign pid holds the lock (the parent of this test process).
    fs.writeFileSync(path.join(dir, "pglite.lock"), String(process.ppid))
    await expect(openPglite({ dataDir: dir })).rejects.toThrow(/in use by process/)
    // A stale lock (no such process) is taken over.
    fs.writeFileSync(path.join(dir, "pglite.lock"), "999999999")
    const opened = await openPglite({ dataDir: dir })
    expect(fs.readFileSync(path.join(dir, "pglite.lock"), "utf8")).toBe(String(process.pid))
    await opened.close()
    expect(fs.existsSync(path.join(dir, "pglite.lock"))).toBe(false)
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
