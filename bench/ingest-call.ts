/**
 * The MX's batch commit alone: `ingest_batch_alone` (or another ingest function) called with N
 * prepared ~2 KiB messages, many times, one call at a time, so what the database spends per batch
 * and per message can be read without SMTP, the prepare thread or a busy event loop around it.
 * On embedded PGlite (the default; run it with the service's V8 flags to match what the service
 * does), or on a scratch database of a PostgreSQL server on this machine (ENGINE=postgres), where
 * the backend's own CPU is read from /proc as well.
 *
 *   node --no-wasm-tier-up --no-wasm-dynamic-tiering bench/ingest-call.ts
 *   N=6 ROUNDS=300 FN=ingest_batch_bytes node … bench/ingest-call.ts
 *   SQL=/tmp/variant.sql node … bench/ingest-call.ts   # SQL run first (a function variant, a dropped index)
 *   ENGINE=postgres N=8 ROUNDS=1000 node bench/ingest-call.ts   # BENCH_DATABASE_URL names the server
 *   ENGINE=postgres N=10 ACCOUNTS=10 node bench/ingest-call.ts  # the messages spread over ten accounts
 *
 * A variant that returns early at a chosen statement, run against the whole function, gives
 * that statement's cost by difference; bench/REPORT.md (MX ingest, 2026-11-27 third session) has
 * what that showed.
 *
 * Two or more functions named in FN (a variant installed under another name by SQL) are called in
 * turn, BLOCK calls each, ROUNDS calls each in all, and each gets its own line: the machine's
 * drift then weighs on all of them alike, where runs one after another differed by ±20 %.
 *
 *   SQL=/tmp/old.sql FN=ingest_batch_bytes_old,ingest_batch_bytes ENGINE=postgres N=8 node bench/ingest-call.ts
 *
 * Where a PostgreSQL backend's CPU goes in those calls (the server's exported functions resolve;
 * bench/REPORT.md, MX ingest, twenty-sixth session, has what it showed):
 *
 *   ENGINE=postgres N=1 ROUNDS=6000 node bench/ingest-call.ts &
 *   sleep 6; pid=$(psql -h 127.0.0.1 -U postgres -Atc "SELECT pid FROM pg_stat_activity WHERE datname LIKE 'bench_ingest_call%' ORDER BY backend_start DESC LIMIT 1")
 *   perf record -F 2000 -g -p $pid -o /tmp/pg.data -- sleep 8
 *   perf report -i /tmp/pg.data --children --sort symbol --stdio -g none | head -80
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parametersOf } from "../effects/ingest/store.ts"
import { byteaInBinary } from "../src/db/pg-wire.ts"
import type { ConnectionSource } from "../src/db/connection.ts"
import { openPglite } from "../src/db/pglite.ts"
import { openPostgres } from "../src/db/postgres.ts"
import { loadMigrations } from "../src/db/migrate.ts"
import { cpuSeconds } from "./mx-support.ts"
import { scratchDatabase } from "./scratch-database.ts"
import { preparedFor } from "../test/support/inbound-fixtures.ts"

const N = Number(process.env.N ?? 10)
const ROUNDS = Number(process.env.ROUNDS ?? 300)
const FNS = (process.env.FN ?? "ingest_batch_alone").split(",")
/** Calls of one function before the next one's turn (several FN). */
const BLOCK = Number(process.env.BLOCK ?? 50)
/** Accounts the batch's messages go to, in turn (one address each). */
const ACCOUNTS = Number(process.env.ACCOUNTS ?? 1)

const ENGINE = process.env.ENGINE === "postgres" ? "postgres" : "pglite"

/** The engine, its schema in place, and the backend's CPU so far in ms (PostgreSQL only). */
const open = async (): Promise<{ source: ConnectionSource; cpuMs: () => number | undefined; close: () => Promise<void> }> => {
  if (ENGINE === "postgres") {
    const scratch = await scratchDatabase("postgres", process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test", "bench_ingest_call")
    // One connection: every statement, the calls among them, runs on the backend measured.
    const { source, close } = openPostgres({ url: scratch.url!, max: 1, lanes: 0 })
    for (const m of loadMigrations()) await source.exec(m.sql)
    const pid = Number(((await source.query("SELECT pg_backend_pid() AS pid"))[0] as { pid: number }).pid)
    return { source, cpuMs: () => cpuSeconds(pid) * 1000, close: async () => (await close(), await scratch.drop()) }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-ingest-call-"))
  const { source, pg, close } = await openPglite({ dataDir: dir })
  // A first start migrates in a child process; where that could not run, migrated here.
  const [row] = await source.query("SELECT to_regclass('inbound_messages')::text AS t")
  if (!(row as { t: string | null }).t) for (const m of loadMigrations()) await pg.exec(m.sql)
  return { source, cpuMs: () => undefined, close: async () => (await close(), fs.rmSync(dir, { recursive: true, force: true })) }
}

const { source, cpuMs, close } = await open()
try {
  const one = async (text: string, params?: ReadonlyArray<unknown>) => (await source.query(text, params))[0] as Record<string, unknown>
  // ACCOUNTS accounts of one address each; the batch's messages go to them in turn (as 20
  // smtp-source processes spread mail over 20 accounts in `npm run bench -- mx`).
  const accounts: Array<{ userId: number; addressId: number; rcpt: string }> = []
  for (let k = 0; k < ACCOUNTS; k++) {
    const userId = Number((await one("INSERT INTO users (name, email, email_verified) VALUES ('bench', $1, true) RETURNING id", [`bench${k}@example.co.tz`])).id)
    await source.query(
      "INSERT INTO wallets (user_id, balance_tzs) VALUES ($1, 1000000000) ON CONFLICT (user_id) DO UPDATE SET balance_tzs = 1000000000",
      [userId],
    )
    const addressId = Number((await one("INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, $2) RETURNING id", [userId, `bench${k}`])).id)
    accounts.push({ userId, addressId, rcpt: `bench${k}@inbox.localhost` })
  }

  // What smtp-source sends, about 2 KiB: a few headers and forty lines of text.
  const body = Array.from({ length: 40 }, (_, i) => `La de da de da ${i}. La de da de da de da de da.`).join("\r\n")
  const raw = [
    "From: <foo@sender.example>",
    "To: <bench@inbox.localhost>",
    "Date: Fri, 27 Nov 2026 06:00:00 +0000",
    "Message-Id: <bench@sender.example>",
    "Subject: hello",
    "",
    body,
    "",
  ].join("\r\n")
  const prepared = (i: number) => {
    const { userId, addressId, rcpt } = accounts[i % ACCOUNTS]!
    return preparedFor(raw, [{ id: addressId, userId, email: rcpt }])
  }
  const batch = await Promise.all(Array.from({ length: N }, (_, i) => prepared(i)))
  for (const file of process.env.SQL?.split(",").filter(Boolean) ?? []) await source.exec(fs.readFileSync(file, "utf8"))

  const call = (fn: string) => {
    const [json, bytes] = parametersOf(batch)
    const blob = ENGINE === "postgres" ? source.bytea(2, bytes) : byteaInBinary(2, bytes)
    return source.query(`SELECT ${fn}($1::jsonb, ${blob.sql}) AS answer`, [json, blob.value])
  }
  for (const fn of FNS) for (let i = 0; i < 50; i++) await call(fn)
  const spent = FNS.map(() => ({ ms: 0, cpu: 0 }))
  const block = FNS.length > 1 ? BLOCK : ROUNDS
  for (let done = 0; done < ROUNDS; done += block) {
    for (const [k, fn] of FNS.entries()) {
      const cpuBefore = cpuMs()
      const started = performance.now()
      for (let i = 0; i < Math.min(block, ROUNDS - done); i++) await call(fn)
      spent[k]!.ms += performance.now() - started
      if (cpuBefore !== undefined) spent[k]!.cpu += cpuMs()! - cpuBefore
    }
  }
  for (const [k, fn] of FNS.entries()) {
    const ms = spent[k]!.ms / ROUNDS
    const cpu = ENGINE === "postgres" ? spent[k]!.cpu / ROUNDS : undefined
    console.log(JSON.stringify({
      engine: ENGINE,
      fn,
      messages: N,
      accounts: ACCOUNTS,
      msPerCall: Number(ms.toFixed(3)),
      msPerMessage: Number((ms / N).toFixed(3)),
      ...(cpu === undefined ? {} : { dbCpuMsPerCall: Number(cpu.toFixed(3)), dbCpuMsPerMessage: Number((cpu / N).toFixed(3)) }),
    }))
  }
} finally {
  await close()
}
