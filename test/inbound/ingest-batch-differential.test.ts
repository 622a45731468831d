/**
 * The batch call against its previous release: `ingest_batch_bytes` as migration 039 wrote it,
 * installed beside the current one under another name, and the current one are given the same
 * random batches (several accounts and addresses, copies to addresses that do not route, balances
 * that run out part-way) from the same state, each in a transaction rolled back afterwards. Their
 * answers and every row they wrote (messages, MIME rows and their parts, ledger entries with the
 * balance after each, address counters, wallets) must be the same, ids aside; and the random
 * batches must have reached every outcome (stored, refused for the balance, refused as unknown). Migration 040 rewrote how the call
 * works its admission out; this holds it to the same outcome.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PreparedMessage } from "../../effects/ingest/prepare.ts"
import { parametersOf, type Prepared } from "../../effects/ingest/store.ts"
import { Database } from "../../effects/ports/Database.ts"
import { migrationsDir } from "../../src/db/migrate.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { preparedFor } from "../support/inbound-fixtures.ts"
import { createAddress, fund, messageWithPdf, plainMessage, query, unique } from "../support/inbound.ts"

let app: TestApp
beforeAll(async () => {
  app = await makeTestApp({ workers: false })
  const previous = fs.readFileSync(path.join(migrationsDir, "039_ingest_text_from_raw.sql"), "utf8")
    .replaceAll("FUNCTION ingest_batch_bytes(", "FUNCTION ingest_batch_bytes_039(")
  await app.run(Database.use((db) => db.exec(previous)))
})
afterAll(() => app.stop())


const withAttachment = messageWithPdf("Habari\r\nya leo")
const html = plainMessage({ extra: "X-Test: html" }).replace("text/plain", "text/html").replace("Habari! This is a test.", "<p>Habari</p>")
const bodies = [plainMessage({ body: "Habari\r\nza asubuhi" }), withAttachment, html]

/** The message as received over TLS (the session facts its row records). */
const overTls = (p: Prepared<PreparedMessage>): Prepared<PreparedMessage> => {
  const row = JSON.parse(new TextDecoder().decode(p.message.row))
  const tls = new TextEncoder().encode(JSON.stringify({ ...row, tls: { protocol: "TLSv1.3", cipher: "TLS_AES_256_GCM_SHA384" } }))
  return { ...p, message: { ...p.message, row: tls } }
}

/** Rolls back the transaction it fails, carrying what was read inside it. */
class Seen {
  readonly value: unknown
  constructor(value: unknown) {
    this.value = value
  }
}

/** Ids the rows got, numbered by first appearance: two runs compare by position, not by sequence value. */
const numbering = () => {
  const seen = new Map<string, number>()
  return (id: unknown) => {
    const key = String(id)
    if (!seen.has(key)) seen.set(key, seen.size)
    return seen.get(key)!
  }
}

/**
 * `fn` called with `batch` after the wallets are set to `balances`; what it answered and wrote,
 * read in its transaction, which is then rolled back.
 */
const outcome = (fn: string, batch: ReadonlyArray<Prepared<PreparedMessage>>, balances: ReadonlyMap<number, number>, addressIds: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const users = [...balances.keys()]
    const run = Effect.gen(function*() {
      for (const [userId, tzs] of balances) yield* db.query("UPDATE wallets SET balance_tzs = $2 WHERE user_id = $1", [userId, tzs])
      const [marks] = yield* db.query<{ m: string; x: string; l: string }>(
        "SELECT (SELECT coalesce(max(id), 0) FROM inbound_messages)::text AS m, (SELECT coalesce(max(id), 0) FROM inbound_mime)::text AS x, (SELECT coalesce(max(id), 0) FROM ledger_entries)::text AS l",
      )
      const [json, bytes] = parametersOf(batch)
      const blob = db.bytea(2, bytes)
      const [row] = yield* db.query<{ answer: unknown }>(`SELECT ${fn}($1::jsonb, ${blob.sql}) AS answer`, [json, blob.value])
      const answer = (typeof row!.answer === "string" ? JSON.parse(row!.answer) : row!.answer) as {
        refused: unknown
        stored: Array<{ i: number; id: number; address_id: number; user_id: number }>
        wallets: Array<number>
        balances: Array<number>
      }
      const message = numbering()
      const mime = numbering()
      const stored = answer.stored.map((s) => ({ ...s, id: message(s.id) }))
      const messages = (yield* db.query<Record<string, unknown>>(
        `SELECT id, address_id, user_id, mime_id, to_addr, subject, text_body, html_body, size_bytes,
                extract(epoch FROM expires_at - received_at)::int8 AS kept_s, received_at, from_addr, envelope_from,
                message_id, headers, attachments, auth_results, tls, tls IS NULL AS no_tls
           FROM inbound_messages WHERE id > $1::int8 ORDER BY id`,
        [marks!.m],
      )).map((m) => ({ ...m, id: message(m.id), mime_id: mime(m.mime_id) }))
      const mimes = (yield* db.query<Record<string, unknown>>(
        `SELECT m.id, m.user_id, m.message_refs, m.size_bytes, md5(m.raw) AS raw,
                (SELECT json_agg(json_build_object('p', a.position, 'f', a.filename, 'c', md5(a.content)) ORDER BY a.position)
                   FROM inbound_attachments a WHERE a.mime_id = m.id) AS parts
           FROM inbound_mime m WHERE m.id > $1::int8 ORDER BY m.id`,
        [marks!.x],
      )).map((m) => ({ ...m, id: mime(m.id) }))
      const ledger = (yield* db.query<Record<string, unknown>>(
        `SELECT user_id, kind, amount_tzs, balance_after_tzs, reference_type, reference_id, description
           FROM ledger_entries WHERE id > $1::int8 ORDER BY id`,
        [marks!.l],
      )).map((l) => ({ ...l, reference_id: message(l.reference_id) }))
      const counters = yield* db.query("SELECT id, message_count, unread_count FROM inbound_addresses WHERE id = ANY ($1::int8[]) ORDER BY id", [addressIds])
      const wallets = yield* db.query("SELECT user_id, balance_tzs FROM wallets WHERE user_id = ANY ($1::int8[]) ORDER BY user_id", [users])
      return yield* Effect.fail(new Seen({ answer: { ...answer, stored }, messages, mimes, ledger, counters, wallets }))
    })
    return yield* db.transaction(run).pipe(
      Effect.flatMap(() => Effect.die("the run was meant to roll back")),
      Effect.catch((e) => (e instanceof Seen ? Effect.succeed(e.value) : Effect.fail(e))),
    )
  })

describe("ingest_batch_bytes against migration 039's", () => {
  it("answers and writes the same for any batch, balances and routes", async () => {
    // Three accounts; the first has two addresses. One more copy goes to an address that does not exist.
    const accounts: Array<{ userId: number; addresses: Array<{ id: number; email: string }> }> = []
    for (let k = 0; k < 3; k++) {
      const a = await createAccount(app)
      await fund(app, a.userId, 100)
      const first = await createAddress(app, a.apiKey, unique("diff"))
      const addresses = [first]
      if (k === 0) {
        const second = await createAddress(app, a.apiKey, unique("diff"))
        // Its own retention: each copy's expiry comes from its address.
        await query(app, "UPDATE inbound_addresses SET retention_days = 7 WHERE id = $1", [second.id])
        addresses.push(second)
      }
      accounts.push({ userId: a.userId, addresses })
    }
    const copies = accounts.flatMap((a) => a.addresses.map((d) => ({ id: d.id, userId: a.userId, email: d.email })))
    copies.push({ id: 2_000_000_000, userId: accounts[0]!.userId, email: "gone@inbox.localhost" })
    const addressIds = copies.map((c) => c.id)
    const reached = new Set<string>()

    const message = fc.record({
      body: fc.nat({ max: bodies.length - 1 }),
      to: fc.uniqueArray(fc.nat({ max: copies.length - 1 }), { minLength: 1, maxLength: 3 }),
      tls: fc.boolean(),
    })
    await fc.assert(
      fc.asyncProperty(
        fc.array(message, { minLength: 1, maxLength: 8 }),
        fc.tuple(...accounts.map(() => fc.integer({ min: 0, max: 45 }))),
        async (messages, tzs) => {
          const batch = await Promise.all(messages.map(async (m) => {
            const p = await preparedFor(bodies[m.body]!, m.to.map((c) => copies[c]!))
            return m.tls ? overTls(p) : p
          }))
          const balances = new Map(accounts.map((a, k) => [a.userId, tzs[k]!]))
          const before = await app.run(outcome("ingest_batch_bytes_039", batch, balances, addressIds))
          const now = await app.run(outcome("ingest_batch_bytes", batch, balances, addressIds))
          expect(now).toEqual(before)
          const { answer } = now as { answer: { stored: Array<unknown>; refused: Array<{ reason: string }> } }
          if (answer.stored.length > 0) reached.add("stored")
          for (const r of answer.refused) reached.add(r.reason)
        },
      ),
      { numRuns: 40 },
    )
    // Not a comparison of two empty answers: both kinds of refusal and stored copies came up.
    expect([...reached].sort()).toEqual(["balance", "stored", "unknown"])
  })
})
