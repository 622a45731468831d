/**
 * The embedded database on its own thread (src/db/pglite-thread.ts): what the in-process adapter
 * promised must still hold across the thread boundary: statement order, a reserved connection
 * holding plain statements back, driver errors with their SQLSTATE, notifications before the
 * answer of the commit that sent them, values of every type the port normalises, bytes handed
 * over moved rather than copied, and no caller left waiting when the thread is gone.
 */
import * as fs from "node:fs"
import { inject } from "vitest"
import { afterEach, describe, expect, it } from "vitest"
import { openPgliteThread, type PgliteThread } from "../../src/db/pglite-thread.ts"

const template = () => new Blob([fs.readFileSync(inject("pgliteTemplate"))])
const opened: Array<PgliteThread> = []
const open = async () => {
  const thread = await openPgliteThread({ loadDataDir: template() })
  opened.push(thread)
  return thread
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((t) => t.close()))
})

describe.skipIf(process.env.TEST_DATABASE_URL !== undefined)("PGlite on its own thread", () => {
  it("answers with the values the port normalises: int8 as number, timestamptz as Date, bytea as bytes, jsonb parsed", async () => {
    const { source } = await open()
    const [row] = await source.query(
      "SELECT 9007199254740::int8 AS n, '2026-11-25T10:00:00Z'::timestamptz AS t, '\\x00ff'::bytea AS b, $1::jsonb AS j, $2::text AS s, '2026-01-02'::date AS d",
      [JSON.stringify({ a: [1, "x"] }), "Ankara ya mwezi ✓"],
    )
    expect(row).toEqual({ n: 9007199254740, t: new Date("2026-11-25T10:00:00Z"), b: new Uint8Array([0, 255]), j: { a: [1, "x"] }, s: "Ankara ya mwezi ✓", d: "2026-01-02" })
  })

  it("moves bytes handed over to the thread instead of copying them, and copies what it may not move", async () => {
    const { source } = await open()
    const bytes = new Uint8Array(100 * 1024).map((_, i) => i % 251)
    const expected = Buffer.from(bytes).toString("hex").slice(0, 64)
    const handed = source.bytea(1, bytes, true)
    const [row] = await source.query(`SELECT length(${handed.sql}) AS n, encode(substring(${handed.sql} FROM 1 FOR 32), 'hex') AS head`, [handed.value])
    expect(row).toEqual({ n: 100 * 1024, head: expected })
    // Moved: the caller's view is empty now (it promised never to read it again).
    expect(bytes.byteLength).toBe(0)

    // Not handed over, or a slice of a shared (pooled) buffer: copied, the caller's bytes intact.
    const kept = new Uint8Array(4096).fill(7)
    const pooled = Buffer.from("a few pooled bytes")
    for (const [b, handOver] of [[kept, false], [pooled, true]] as const) {
      const p = source.bytea(1, b, handOver)
      const [r] = await source.query(`SELECT length(${p.sql}) AS n`, [p.value])
      expect(r).toEqual({ n: b.byteLength })
      expect(b.byteLength).toBeGreaterThan(0)
    }
    expect(pooled.toString()).toBe("a few pooled bytes")
  })

  it("fails a statement with the driver's SQLSTATE and constraint, and goes on", async () => {
    const { source } = await open()
    await source.exec("CREATE TABLE t (k text PRIMARY KEY)")
    await source.query("INSERT INTO t VALUES ('a')")
    const e = await source.query("INSERT INTO t VALUES ('a')").catch((e: unknown) => e as { code?: string; constraint?: string; message: string })
    expect(e).toMatchObject({ code: "23505", constraint: "t_pkey" })
    expect((await source.query("SELECT count(*)::int8 AS n FROM t"))[0]).toEqual({ n: 1 })
  })

  it("runs statements in the order they were asked, and holds plain statements back while a connection is reserved", async () => {
    const { source } = await open()
    await source.exec("CREATE TABLE log (i serial, what text)")
    const reserved = await source.reserve()
    // Asked while the transaction holds the connection: it must not run inside or before it.
    const outside = source.query("INSERT INTO log (what) VALUES ('outside') RETURNING i")
    const inside = await Promise.all([
      reserved.connection.query("BEGIN"),
      reserved.connection.query("INSERT INTO log (what) VALUES ('inside 1')"),
      reserved.connection.query("INSERT INTO log (what) VALUES ('inside 2')"),
    ])
    expect(inside).toHaveLength(3)
    await reserved.connection.query("ROLLBACK")
    await reserved.release()
    await outside
    expect((await source.query("SELECT what FROM log ORDER BY i")).map((r) => r.what)).toEqual(["outside"])
  })

  it("hands a notification over before the answer of the statement that committed it", async () => {
    const thread = await open()
    const events: Array<string> = []
    const unlisten = await thread.listen("app_test", (payload) => events.push(`notified ${payload}`))
    await thread.source.query("SELECT pg_notify('app_test', 'k|1')")
    events.push("answered")
    expect(events).toEqual(["notified k|1", "answered"])
    await unlisten()
    await thread.source.query("SELECT pg_notify('app_test', 'k|2')")
    expect(events).toEqual(["notified k|1", "answered"])
  })

  it("fails every waiting and later statement once its thread is gone, instead of leaving callers waiting", async () => {
    const thread = await openPgliteThread({ loadDataDir: template() }, new URL("../support/dying-pglite-worker.ts", import.meta.url))
    opened.push(thread)
    const waiting = thread.source.query("SELECT 'die' AS x")
    await expect(waiting).rejects.toThrow(/thread exited/)
    await expect(thread.source.query("SELECT 1")).rejects.toThrow(/thread exited/)
  })

  it("refuses to open a locked data directory, as the in-process adapter does", async () => {
    const os = await import("node:os")
    const path = await import("node:path")
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "thread-lock-"))
    fs.writeFileSync(path.join(dir, "pglite.lock"), String(process.ppid))
    await expect(openPgliteThread({ dataDir: dir })).rejects.toThrow(/in use by process/)
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
