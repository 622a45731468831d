/**
 * The ingest actor's batch commit (effects/ingest/store.ts, writer.ts) and the RCPT-time holds
 * (admission.ts), driven directly: messages admitted in arrival order up to the locked balance,
 * the rest refused with nothing written; a message to two accounts whole or not at all; each
 * message of a batch its own bytes back (raw MIME, bodies, attachments, by offset); the same
 * number of statements for 1 message or 40; one bad message never failing its batch-mates; the
 * webhook worker woken at commit only when a delivery was queued; money promised at RCPT held
 * until the transaction ends.
 */
import { Deferred, Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../effects/apikeys/service.ts"
import { MessageEvents } from "../../effects/ingest/events.ts"
import type { PreparedMessage } from "../../effects/ingest/prepare.ts"
import { commitAlone, commitBatch, type Prepared } from "../../effects/ingest/store.ts"
import { batchBytesFor, bySize, IngestWriter, LINGER_BELOW, lingerFor, makeIngestWriter } from "../../effects/ingest/writer.ts"
import { Database } from "../../effects/ports/Database.ts"
import { WorkSignals } from "../../effects/ports/WorkSignals.ts"
import { WEBHOOK_QUEUE } from "../../effects/webhooks/delivery.ts"
import { endTransaction, newSessionState, onMailFrom, onRecipient } from "../../src/smtp/session.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { loggedTestDatabase } from "../support/db.ts"
import { parseMail } from "../../effects/ingest/mime.ts"
import { preparedFor } from "../support/inbound-fixtures.ts"
import { alternativeMessage, balance, countMessages, createAddress, fund, messageWithPdf, PDF_BASE64, plainMessage, query, unique } from "../support/inbound.ts"

/** Statements run through the Database port, by their first words. */
const statements: Array<string> = []
let app: TestApp
beforeAll(async () => {
  app = await makeTestApp({ workers: false, database: loggedTestDatabase(statements, { collapse: true }) })
})
afterAll(() => app.stop())


/**
 * Writes the API key use the setup's HTTP calls noted (listing keys writes it first): its periodic
 * flush would otherwise land among the statements a test counts.
 */
const flushKeyUse = ApiKeys.use((k) => k.list(0)).pipe(Effect.orDie, Effect.asVoid)

/** Starts a count of statements from here on. */
const startCounting = async () => {
  await app.run(flushKeyUse)
  statements.length = 0
}

const account = async (tzs: number) => {
  const a = await createAccount(app)
  if (tzs > 0) await fund(app, a.userId, tzs)
  const address = await createAddress(app, a.apiKey, unique("box"))
  return { ...a, address }
}

const pdf = PDF_BASE64
const withAttachment = messageWithPdf()

/**
 * A message as the writer gets it (test/support/inbound-fixtures.ts). `subject` replaces the
 * stored subject as is, past the text rules (a way to make one row unstorable).
 */
const prepared = (raw: string, copies: ReadonlyArray<{ id: number; userId: number; email: string }>, subject?: string) =>
  Effect.promise(async (): Promise<Prepared<PreparedMessage>> => {
    const p = await preparedFor(raw, copies)
    if (subject === undefined) return p
    const row = new TextEncoder().encode(JSON.stringify({ ...JSON.parse(new TextDecoder().decode(p.message.row)), subject }))
    return { ...p, message: { ...p.message, row } }
  })

const commit = (batch: ReadonlyArray<Prepared>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const events = yield* MessageEvents
    return yield* db.transaction(commitBatch(db, events, batch))
  })

const copyOf = (a: Awaited<ReturnType<typeof account>>) => ({ id: a.address.id, userId: a.userId, email: a.address.email })

describe("the batch commit", () => {
  it("admits in arrival order up to the balance; the rest are refused with nothing stored or charged", async () => {
    const a = await account(10) // two messages
    const b = await account(1000)
    const order = [a, b, a, a, b, a]
    const result = await app.run(Effect.gen(function*() {
      const batch = yield* Effect.forEach(order, (x, i) => prepared(plainMessage({ subject: `m${i}` }), [copyOf(x)]))
      return yield* commit(batch)
    }))
    expect(result.outcomes.map((o) => o._tag)).toEqual(["Stored", "Stored", "Stored", "Refused", "Stored", "Refused"])
    for (const o of result.outcomes) if (o._tag === "Refused") expect(o.error._tag).toBe("InsufficientBalance")
    expect(await countMessages(app, a.userId)).toBe(2)
    expect(await countMessages(app, b.userId)).toBe(2)
    expect(await balance(app, a.userId)).toBe(0)
    const subjects = await query<{ subject: string }>(app, "SELECT subject FROM inbound_messages WHERE user_id = $1 ORDER BY id", [a.userId])
    expect(subjects.map((s) => s.subject)).toEqual(["m0", "m2"])
    const mime = await query<{ n: number }>(app, "SELECT count(*)::int8 AS n FROM inbound_mime WHERE user_id = $1", [a.userId])
    expect(mime[0]!.n).toBe(2)
    // One ledger entry per message, each with the balance after it, summing to the balance.
    const ledger = await query<{ amount_tzs: number; balance_after_tzs: number; reference_id: string }>(
      app,
      "SELECT amount_tzs, balance_after_tzs, reference_id FROM ledger_entries WHERE user_id = $1 AND kind = 'debit' ORDER BY id",
      [a.userId],
    )
    const ids = (result.outcomes.flatMap((o) => (o._tag === "Stored" ? o.messages : [])).filter((m) => m.userId === a.userId)).map((m) => String(m.id))
    expect(ledger).toEqual([
      { amount_tzs: -5, balance_after_tzs: 5, reference_id: ids[0] },
      { amount_tzs: -5, balance_after_tzs: 0, reference_id: ids[1] },
    ])
    const [counts] = await query<{ message_count: number; unread_count: number }>(
      app,
      "SELECT message_count, unread_count FROM inbound_addresses WHERE id = $1",
      [a.address.id],
    )
    expect(counts).toEqual({ message_count: 2, unread_count: 2 })
  })

  it("takes a message to two accounts whole or not at all", async () => {
    const rich = await account(100)
    const broke = await account(0)
    const result = await app.run(Effect.flatMap(prepared(plainMessage(), [copyOf(rich), copyOf(broke)]), (p) => commit([p])))
    const refusal = result.outcomes[0]!
    expect(refusal._tag === "Refused" && refusal.error).toMatchObject({ _tag: "InsufficientBalance", required_tzs: 5, balance_tzs: 0 })
    expect(await countMessages(app, rich.userId)).toBe(0)
    expect(await balance(app, rich.userId)).toBe(100)
    expect(await query(app, "SELECT id FROM inbound_mime WHERE user_id = $1", [rich.userId])).toHaveLength(0)
  })

  it("refuses a copy whose address went away after RCPT, and only that message", async () => {
    const a = await account(100)
    const gone = await account(100)
    const result = await app.run(Effect.gen(function*() {
      const batch = yield* Effect.forEach([a, gone, a], (x, i) => prepared(plainMessage({ subject: `g${i}` }), [copyOf(x)]))
      yield* Effect.orDie(Database.use((db) => db.query("DELETE FROM inbound_addresses WHERE id = $1", [gone.address.id])))
      return yield* commit(batch)
    }))
    expect(result.outcomes.map((o) => o._tag)).toEqual(["Stored", "Refused", "Stored"])
    const refusal = result.outcomes[1]!
    expect(refusal._tag === "Refused" && refusal.error._tag).toBe("UnknownRecipient")
    expect(await countMessages(app, a.userId)).toBe(2)
    expect(await balance(app, gone.userId)).toBe(100)
    expect(await query(app, "SELECT id FROM ledger_entries WHERE user_id = $1 AND kind = 'debit'", [gone.userId])).toHaveLength(0)
  })

  it("stores one MIME row per account, a row, a debit and a count per copy, retention from each address", async () => {
    const a = await account(1000)
    const b = await account(1000)
    const second = await createAddress(app, a.apiKey, unique("box"))
    await query(app, "UPDATE inbound_addresses SET retention_days = 7 WHERE id = $1", [second.id])
    const copies = [copyOf(a), copyOf(b), { id: second.id, userId: a.userId, email: second.email }]
    const result = await app.run(Effect.gen(function*() {
      const batch = [yield* prepared(plainMessage({ subject: "x1" }), copies), yield* prepared(plainMessage({ subject: "x2" }), [copyOf(a)])]
      return yield* commit(batch)
    }))
    const [first, next] = result.outcomes
    // Account by account in the order the recipients named them, copies in RCPT order.
    expect(first?._tag === "Stored" && first.messages.map((m) => [m.userId, m.addressId, m.toAddr])).toEqual([
      [a.userId, a.address.id, a.address.email],
      [a.userId, second.id, second.email],
      [b.userId, b.address.id, b.address.email],
    ])
    expect(next?._tag === "Stored" && next.messages).toHaveLength(1)
    const rows = await query<{ user_id: number; mime_id: number; days: number }>(
      app,
      `SELECT m.user_id, m.mime_id, round(extract(epoch FROM m.expires_at - m.received_at) / 86400)::int4 AS days
         FROM inbound_messages m WHERE m.user_id IN ($1, $2) ORDER BY m.id`,
      [a.userId, b.userId],
    )
    expect(rows.map((r) => [r.user_id, r.days])).toEqual([[a.userId, 30], [a.userId, 7], [b.userId, 30], [a.userId, 30]])
    expect(rows[0]!.mime_id).toBe(rows[1]!.mime_id)
    expect(new Set(rows.map((r) => r.mime_id)).size).toBe(3)
    const refs = await query<{ message_refs: number }>(app, "SELECT message_refs FROM inbound_mime WHERE id = $1", [rows[0]!.mime_id])
    expect(refs[0]!.message_refs).toBe(2)
    // a: three copies in id order, each ledger row with the balance right after it.
    const ledger = await query<{ balance_after_tzs: number }>(
      app,
      "SELECT balance_after_tzs FROM ledger_entries WHERE user_id = $1 AND kind = 'debit' ORDER BY id",
      [a.userId],
    )
    expect(ledger.map((l) => l.balance_after_tzs)).toEqual([995, 990, 985])
    expect(await balance(app, a.userId)).toBe(985)
    expect(await balance(app, b.userId)).toBe(995)
    const counted = await query<{ message_count: number }>(app, "SELECT message_count FROM inbound_addresses WHERE id IN ($1, $2) ORDER BY id", [
      a.address.id,
      second.id,
    ])
    expect(counted.map((c) => c.message_count)).toEqual([2, 1])
  })

  it("gives each message of a batch its own bytes back: raw MIME, text and HTML bodies, attachments", async () => {
    const a = await account(1000)
    const html = (i: number) =>
      [
        "From: Asha <asha@sender.example>",
        `Subject: html ${i}`,
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="m"',
        "",
        "--m",
        'Content-Type: multipart/alternative; boundary="a"',
        "",
        "--a",
        "Content-Type: text/plain; charset=utf-8",
        "",
        `Maandishi ${i} ✓ ${"ü".repeat(i * 300)}`,
        "--a",
        "Content-Type: text/html; charset=utf-8",
        "",
        `<p>HTML ${i} — €${i}</p>`,
        "--a--",
        "--m",
        `Content-Type: application/octet-stream; name="p${i}.bin"`,
        "Content-Transfer-Encoding: base64",
        "",
        Buffer.alloc(100 + i * 977, i).toString("base64"),
        "--m--",
        "",
      ].join("\r\n")
    // Different sizes, with and without parts and HTML, all in one commit.
    const raws = [html(1), plainMessage({ subject: "plain 2", body: "Habari 2 😀" }), html(3), withAttachment, html(5)]
    const stored = await app.run(Effect.gen(function*() {
      const batch = yield* Effect.forEach(raws, (raw) => prepared(raw, [copyOf(a)]))
      const r = yield* commit(batch)
      return r.outcomes.map((o) => (o._tag === "Stored" ? o.messages[0]!.id : 0))
    }))
    expect(stored.every((id) => id > 0)).toBe(true)
    for (const [k, id] of stored.entries()) {
      const [row] = await query<{ raw: Uint8Array; text_body: string; html_body: string; size_bytes: number }>(
        app,
        "SELECT x.raw, m.text_body, m.html_body, m.size_bytes FROM inbound_messages m JOIN inbound_mime x ON x.id = m.mime_id WHERE m.id = $1",
        [id],
      )
      const raw = Buffer.from(row!.raw)
      // The trace in front, then the message byte for byte.
      expect(raw.subarray(raw.length - Buffer.byteLength(raws[k]!)).toString("utf8")).toBe(raws[k])
      expect(raw.subarray(0, raw.length - Buffer.byteLength(raws[k]!)).toString("utf8")).toMatch(/^Received-SPF: /)
      expect(row!.size_bytes).toBe(raw.length)
      const parts = await query<{ filename: string; content: Uint8Array }>(
        app,
        "SELECT t.filename, t.content FROM inbound_attachments t JOIN inbound_messages m ON m.mime_id = t.mime_id WHERE m.id = $1 ORDER BY t.position",
        [id],
      )
      const i = [1, 0, 3, 0, 5][k]!
      if (i > 0) {
        expect(row!.text_body).toBe(`Maandishi ${i} ✓ ${"ü".repeat(i * 300)}`)
        expect(row!.html_body).toBe(`<p>HTML ${i} — €${i}</p>`)
        expect(parts.map((p) => p.filename)).toEqual([`p${i}.bin`])
        expect(Buffer.from(parts[0]!.content).equals(Buffer.alloc(100 + i * 977, i))).toBe(true)
      }
    }
    expect((await query<{ text_body: string }>(app, "SELECT text_body FROM inbound_messages WHERE id = $1", [stored[1]]))[0]!.text_body).toBe(
      "Habari 2 😀\n",
    )
    const pdfPart = await query<{ content: Uint8Array }>(
      app,
      "SELECT t.content FROM inbound_attachments t JOIN inbound_messages m ON m.mime_id = t.mime_id WHERE m.id = $1",
      [stored[3]],
    )
    expect(Buffer.from(pdfPart[0]!.content).equals(Buffer.from(pdf, "base64"))).toBe(true)
  })

  it("reads a plain text body from the raw MIME it stores, and is sent any other text", async () => {
    const a = await account(1000)
    const head = (extra: ReadonlyArray<string> = []) =>
      ["From: <asha@sender.example>", "Subject: text", "Content-Type: text/plain; charset=utf-8", ...extra, "", ""].join("\r\n")
    const cases: ReadonlyArray<{ readonly raw: Buffer; readonly fromRaw: boolean }> = [
      // The body's own bytes: CR LF made LF, a bare CR or LF left alone, UTF-8 as it is.
      { raw: Buffer.from(head() + "Habari \u{1f600}\r\nline two\r\n\r\nbare\rcr and\nlf\r\nno final line end"), fromRaw: true },
      { raw: Buffer.from(head(["Content-Transfer-Encoding: 8bit"]) + "\u00fc".repeat(3000) + "\r\n"), fromRaw: true },
      // Text that is not the body's bytes as they are: sent by the preparer, as before.
      { raw: Buffer.concat([Buffer.from(head()), Buffer.from([0x61, 0x00, 0x62, 0x0d, 0x0a])]), fromRaw: false },
      { raw: Buffer.concat([Buffer.from(head()), Buffer.from([0x61, 0xff, 0xfe, 0x62, 0x0d, 0x0a])]), fromRaw: false },
      { raw: Buffer.from(head(["Content-Transfer-Encoding: quoted-printable"]) + "caf=C3=A9 =\r\nsoft\r\n"), fromRaw: false },
      // An alternative's one text/plain part is its bytes too; two text/plain parts are joined.
      { raw: alternativeMessage({ text: "Habari \u{1f600}\r\nline two\r\n", html: "<p>x</p>" }), fromRaw: true },
      { raw: alternativeMessage({ text: "moja\r\n", html: "mbili" }).replace("text/html", "text/plain"), fromRaw: false },
    ].map((c) => ({ ...c, raw: Buffer.from(c.raw) }))
    const ids = await app.run(Effect.gen(function*() {
      const batch = yield* Effect.forEach(cases, ({ raw }) => Effect.promise(() => preparedFor(raw, [copyOf(a)])))
      // Which way each row says its text comes (the blob then holds no copy of it).
      expect(batch.map((p) => JSON.parse(new TextDecoder().decode(p.message.row)).text_crlf === true)).toEqual(cases.map((c) => c.fromRaw))
      const r = yield* commit(batch)
      return r.outcomes.map((o) => (o._tag === "Stored" ? o.messages[0]!.id : 0))
    }))
    for (const [k, id] of ids.entries()) {
      const [row] = await query<{ text_body: string }>(app, "SELECT text_body FROM inbound_messages WHERE id = $1", [id])
      // What the parse gives: the text the preparer sends when it sends one.
      expect(row!.text_body, `case ${k}`).toBe((await parseMail(cases[k]!.raw)).text)
    }
    expect((await query<{ text_body: string }>(app, "SELECT text_body FROM inbound_messages WHERE id = $1", [ids[0]]))[0]!.text_body).toBe(
      "Habari \u{1f600}\nline two\n\nbare\rcr and\nlf\nno final line end",
    )
  })

  it("runs the same statements for one message as for forty (with attachments, two accounts)", async () => {
    const a = await account(1000)
    const b = await account(1000)
    const count = async (n: number) => {
      await startCounting()
      await app.run(Effect.gen(function*() {
        const batch = yield* Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) =>
          prepared(withAttachment, i % 2 ? [copyOf(a), copyOf(b)] : [copyOf(a)]))
        const r = yield* commit(batch)
        yield* r.afterCommit
      }))
      // IN lists grow with the ids they name; the statements themselves must not multiply.
      return statements.map((s) => s.replace(/\$\d+::\w+(, \$\d+::\w+)*/g, "…"))
    }
    const one = await count(1)
    const forty = await count(40)
    expect(forty).toEqual(one)
    expect(one.length).toBeLessThanOrEqual(6)
    // 1 + 20 (second copies) messages for a, 20 for b, each with its attachment, in one go.
    expect(await countMessages(app, a.userId)).toBe(41)
    expect(await countMessages(app, b.userId)).toBe(20)
    const parts = await query<{ n: number }>(
      app,
      "SELECT count(*)::int8 AS n FROM inbound_attachments t JOIN inbound_mime m ON m.id = t.mime_id WHERE m.user_id IN ($1, $2)",
      [a.userId, b.userId],
    )
    expect(parts[0]!.n).toBe(61)
    expect(await balance(app, a.userId)).toBe(1000 - 41 * 5)
  })
})

describe("the follow-up work of a commit", () => {
  /** The subscribers' statements a commit of one message to each of `copies` ran, by their first words. */
  const followUps = async (copies: ReadonlyArray<ReturnType<typeof copyOf>>) => {
    await startCounting()
    await app.run(Effect.gen(function*() {
      const r = yield* commit([yield* prepared(plainMessage(), copies)])
      yield* r.afterCommit
    }))
    return statements.filter((s) => !s.startsWith("SELECT ingest_batch") && !["BEGIN", "COMMIT"].includes(s)).map((s) => s.split("(")[0]!)
  }
  /** Rows `table` queued for the messages of account `userId`. */
  const pending = async (table: string, userId: number) =>
    (await query<{ n: number }>(app, `SELECT count(*)::int8 AS n FROM ${table} d JOIN inbound_messages m ON m.id = d.message_id WHERE m.user_id = $1`, [userId]))[0]!.n

  it("asks which subscription tables apply, then runs only those subscribers", async () => {
    const a = await account(1000)
    // Nothing subscribed: one question, no subscriber statement.
    expect(await followUps([copyOf(a)])).toEqual(["SELECT t FROM followup_subscriptions"])

    // Each kind of subscription, one at a time, switches on its subscriber and only its own.
    const webhook = await query<{ id: number }>(
      app,
      "INSERT INTO webhooks (user_id, address_id, url, secret_sealed) VALUES ($1, $2, 'https://hooks.example/a', 'x') RETURNING id",
      [a.userId, a.address.id],
    )
    expect(await followUps([copyOf(a)])).toEqual(["SELECT t FROM followup_subscriptions", "SELECT queue_webhook_deliveries"])
    expect(await pending("webhook_deliveries", a.userId)).toBe(1)
    await query(app, "UPDATE webhooks SET is_active = false WHERE id = $1", [webhook[0]!.id])

    const endpoint = await query<{ id: number }>(
      app,
      `INSERT INTO event_endpoints (user_id, url, secret_sealed, events) VALUES ($1, 'https://hooks.example/e', 'x', '["inbound.message_received"]') RETURNING id`,
      [a.userId],
    )
    expect(await followUps([copyOf(a)])).toEqual(["SELECT t FROM followup_subscriptions", "SELECT queue_event_deliveries"])
    expect(await pending("event_deliveries", a.userId)).toBe(1)
    await query(app, "UPDATE event_endpoints SET is_active = false WHERE id = $1", [endpoint[0]!.id])

    await query(
      app,
      "INSERT INTO sms_rules (user_id, address_id, phone_number, provider_key_sealed, provider_key_prefix) VALUES ($1, $2, '+255712345678', 'x', 'x')",
      [a.userId, a.address.id],
    )
    expect((await followUps([copyOf(a)]))[1]).toBe("SELECT address_id FROM sms_ruled_addresses")
    expect(await pending("sms_deliveries", a.userId)).toBe(1)
    await query(app, "UPDATE sms_rules SET is_active = false WHERE address_id = $1", [a.address.id])

    // An agent that is off is no subscription; one in draft mode is.
    await query(app, "INSERT INTO agent_configs (address_id, user_id, mode) VALUES ($1, $2, 'off')", [a.address.id, a.userId])
    expect(await followUps([copyOf(a)])).toEqual(["SELECT t FROM followup_subscriptions"])
    await query(app, "UPDATE agent_configs SET mode = 'draft' WHERE address_id = $1", [a.address.id])
    expect(await followUps([copyOf(a)])).toEqual(["SELECT t FROM followup_subscriptions", "SELECT queue_agent_jobs"])
    expect(await pending("agent_jobs", a.userId)).toBe(1)
  })

  it("makes an SMS summary from the stored text of a message whose text the database made, and from the prepared one otherwise", async () => {
    const a = await account(1000)
    await query(
      app,
      "INSERT INTO sms_rules (user_id, address_id, phone_number, provider_key_sealed, provider_key_prefix) VALUES ($1, $2, '+255712345678', 'x', 'x')",
      [a.userId, a.address.id],
    )
    // A plain body in its row: its text is a range of it, never a string before the database made it.
    const ranged = plainMessage({ subject: "moja", body: "Mzigo wako umefika \u{1f69a}\r\nleo asubuhi." })
    const qp = plainMessage({ subject: "mbili", body: "Malipo =3D TSh 5", extra: "Content-Transfer-Encoding: quoted-printable" })
    await app.run(Effect.gen(function*() {
      const batch = yield* Effect.forEach([ranged, qp], (raw) => prepared(raw, [copyOf(a)]))
      expect(batch.map((p) => p.message.smsBody)).toEqual([undefined, "Malipo = TSh 5\n"])
      const r = yield* commit(batch)
      yield* r.afterCommit
    }))
    const bodies = await query<{ body: string }>(
      app,
      "SELECT d.body FROM sms_deliveries d JOIN inbound_messages m ON m.id = d.message_id WHERE m.user_id = $1 ORDER BY m.id",
      [a.userId],
    )
    expect(bodies.map((b) => b.body)).toEqual([
      "From Alice <alice@sender.example>: moja | Mzigo wako umefika \u{1f69a} leo asubuhi.",
      "From Alice <alice@sender.example>: mbili | Malipo = TSh 5",
    ])
  })

  it("runs a subscriber when any message of the commit has its subscription, and queues only for that one", async () => {
    const a = await account(1000)
    const b = await account(1000)
    await query(app, "INSERT INTO webhooks (user_id, address_id, url, secret_sealed) VALUES ($1, $2, 'https://hooks.example/b', 'x')", [
      b.userId,
      b.address.id,
    ])
    expect(await followUps([copyOf(a), copyOf(b)])).toEqual(["SELECT t FROM followup_subscriptions", "SELECT queue_webhook_deliveries"])
    expect(await pending("webhook_deliveries", a.userId)).toBe(0)
    expect(await pending("webhook_deliveries", b.userId)).toBe(1)
  })
})

describe("the writer", () => {
  it("never lets one bad message fail its batch-mates", async () => {
    const a = await account(1000)
    await startCounting()
    const results = await app.run(Effect.gen(function*() {
      const writer = yield* IngestWriter
      // A NUL that got past the text rules (a bug elsewhere): PostgreSQL refuses that row.
      const batch = yield* Effect.forEach([0, 1, 2, 3, 4], (i) => prepared(plainMessage({ subject: `w${i}` }), [copyOf(a)], i === 2 ? "bad\u0000" : undefined))
      return yield* Effect.forEach(batch, (p) => Effect.result(writer.submit(p)), { concurrency: "unbounded" })
    }))
    expect(results.map((r) => r._tag)).toEqual(["Success", "Success", "Failure", "Success", "Success"])
    expect(await countMessages(app, a.userId)).toBe(4)
    expect(await balance(app, a.userId)).toBe(1000 - 4 * 5)
    // The five went together once, then one by one.
    expect(statements.filter((s) => s.startsWith("SELECT ingest_batch"))).toHaveLength(6)
  })
})

describe("the writer's memory", () => {
  it("frees each message's bytes and row once it is answered, and not before: a bad message's batch-mates, retried alone, are stored whole", async () => {
    const a = await account(1000)
    const raws = [withAttachment, plainMessage({ subject: "m1" }), plainMessage({ subject: "m2", body: "Habari 😀" })]
    const { batch, results } = await app.run(Effect.gen(function*() {
      const writer = yield* IngestWriter
      const batch = yield* Effect.forEach(raws, (raw, i) => prepared(raw, [copyOf(a)], i === 1 ? "bad\u0000" : undefined))
      const results = yield* Effect.forEach(batch, (p) => Effect.result(writer.submit(p)), { concurrency: "unbounded" })
      return { batch, results }
    }))
    expect(results.map((r) => r._tag)).toEqual(["Success", "Failure", "Success"])
    for (const k of [0, 2]) {
      const r = results[k]!
      if (r._tag !== "Success") throw new Error("stored")
      const [row] = await query<{ raw: Uint8Array }>(
        app,
        "SELECT x.raw FROM inbound_messages m JOIN inbound_mime x ON x.id = m.mime_id WHERE m.id = $1",
        [r.success[0]!.id],
      )
      const raw = Buffer.from(row!.raw)
      expect(raw.subarray(raw.length - Buffer.byteLength(raws[k]!)).toString("utf8")).toBe(raws[k])
    }
    const pdfPart = await query<{ content: Uint8Array }>(
      app,
      "SELECT t.content FROM inbound_attachments t JOIN inbound_messages m ON m.mime_id = t.mime_id WHERE m.id = $1",
      [(results[0] as { success: ReadonlyArray<{ id: number }> }).success[0]!.id],
    )
    expect(Buffer.from(pdfPart[0]!.content).equals(Buffer.from(pdf, "base64"))).toBe(true)
    // Answered, the three gave their memory back (the bad one too).
    for (const p of batch) {
      expect(p.message.bytes.byteLength).toBe(0)
      expect(p.message.row.byteLength).toBe(0)
    }
  })
})

/**
 * Submits `ready` to a new writer while another transaction holds `a`'s wallet (on PGlite: the
 * one connection): the idle writer takes the first at once and its commit waits for the holder;
 * the others arrive meanwhile and gather in the mailbox. Then the holder lets go. Answers what
 * each submit answered, and the engine.
 */
const gatheredWhileHeld = (a: Awaited<ReturnType<typeof account>>, ready: ReadonlyArray<Prepared<PreparedMessage>>) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* makeIngestWriter()
    const gate = yield* Deferred.make<void>()
    const holding = yield* Deferred.make<void>()
    const holder = yield* Effect.forkChild(db.transaction(Effect.gen(function*() {
      yield* db.query("SELECT balance_tzs FROM wallets WHERE user_id = $1 FOR UPDATE", [a.userId])
      yield* Deferred.succeed(holding, undefined)
      yield* Deferred.await(gate)
    })))
    yield* Deferred.await(holding)
    const first = yield* Effect.forkChild(writer.submit(ready[0]!))
    yield* Effect.sleep("200 millis")
    const rest = yield* Effect.forEach(ready.slice(1), (p) => Effect.forkChild(writer.submit(p)))
    yield* Effect.sleep("50 millis")
    yield* Deferred.succeed(gate, undefined)
    yield* Fiber.join(holder)
    return { results: yield* Effect.forEach([first, ...rest], Fiber.join), dialect: db.dialect }
  }))

describe("the writer's batches", () => {
  it("commit what is ready at once, and what arrives during a commit goes together in the next one", async () => {
    const a = await account(1000)
    const ready = await app.run(Effect.forEach([0, 1, 2, 3], (i) => prepared(plainMessage({ subject: `g${i}` }), [copyOf(a)])))
    await startCounting()
    const { results } = await app.run(gatheredWhileHeld(a, ready))
    expect(results.flat()).toHaveLength(4)
    // The first alone, the three that came meanwhile in one more: never one commit per message.
    expect(statements.filter((s) => s.startsWith("SELECT ingest_batch"))).toHaveLength(2)
    expect(await countMessages(app, a.userId)).toBe(4)
    expect(await balance(app, a.userId)).toBe(1000 - 4 * 5)
  })
})

describe("the writer's wait for company", () => {
  /** Two messages through a writer of `lingerMs`, the second 40 ms after the first: the batch calls made. */
  const twoApart = async (lingerMs: number) => {
    const a = await account(1000)
    const ready = await app.run(Effect.forEach([0, 1], (i) => prepared(plainMessage({ subject: `c${i}` }), [copyOf(a)])))
    await startCounting()
    await app.run(Effect.scoped(Effect.gen(function*() {
      const writer = yield* makeIngestWriter({ lingerMs })
      const first = yield* Effect.forkChild(writer.submit(ready[0]!))
      yield* Effect.sleep("40 millis")
      const second = yield* Effect.forkChild(writer.submit(ready[1]!))
      yield* Fiber.join(first)
      yield* Fiber.join(second)
    })))
    expect(await countMessages(app, a.userId)).toBe(2)
    return statements.filter((s) => s.startsWith("SELECT ingest_batch")).length
  }

  it("lets a small batch wait for what comes meanwhile, then commits it together; without a wait, at once", async () => {
    expect(await twoApart(400)).toBe(1)
    expect(await twoApart(0)).toBe(2)
  })

  it("waits on PGlite only (a call's fixed cost there), below four messages", () => {
    expect(lingerFor("pglite")).toBe(3)
    expect(lingerFor("postgres")).toBe(0)
    expect(LINGER_BELOW).toBe(4)
  })
})

describe("the writer's batches by size", () => {
  it("groups consecutive messages up to the cap, in order; one larger than the cap goes alone", () => {
    const KiB = 1024
    const sizes = [600 * KiB, 100 * KiB, 300 * KiB, 200 * KiB, 2048 * KiB, 10 * KiB, 1024 * KiB]
    expect(bySize(sizes, (n) => n, 1024 * KiB).map((g) => g.map((n) => n / KiB))).toEqual([[600, 100, 300], [200], [2048], [10], [1024]])
    expect(bySize([], (n: number) => n, 1024)).toEqual([])
    // PGlite's copies of a batch stay in its memory and malloc's: half of PostgreSQL's cap.
    expect(batchBytesFor("pglite")).toBe(512 * KiB)
    expect(batchBytesFor("postgres")).toBe(1024 * KiB)
  })

  it("commits what gathered in consecutive statements of at most the engine's cap of message bytes", async () => {
    const a = await account(100_000)
    // ~300 KiB of plain text: each message's bytes (the trace and the raw MIME; its text the
    // database reads from the raw MIME, migration 039) are ~300 KiB.
    const body = Array.from({ length: 4_000 }, (_, i) => `line ${String(i).padStart(4, "0")} ${"x".repeat(64)}`).join("\r\n")
    const ready = await app.run(Effect.forEach([0, 1, 2, 3, 4, 5], (i) => prepared(plainMessage({ subject: `big${i}`, body }), [copyOf(a)])))
    // Read now: once answered, each message's bytes are given back.
    const sizes = ready.map((p) => p.message.bytes.byteLength)
    await startCounting()
    const { results, dialect } = await app.run(gatheredWhileHeld(a, ready))
    for (const size of sizes) {
      expect(size).toBeGreaterThan(290 * 1024)
      expect(size).toBeLessThan(340 * 1024)
    }
    expect(results.flat()).toHaveLength(6)
    // The first alone; then, on PGlite (512 KiB), the five one by one; on PostgreSQL (1 MiB), three and two.
    expect(statements.filter((s) => s.startsWith("SELECT ingest_batch"))).toHaveLength(dialect === "pglite" ? 6 : 3)
    expect(await countMessages(app, a.userId)).toBe(6)
    expect(await balance(app, a.userId)).toBe(100_000 - 6 * 5)
  })
})

describe("the writer's one-statement commit", () => {
  /** What submitting one message to `a` through a writer ran, by first words (BEGIN/COMMIT are the port's own). */
  const submitted = (a: Awaited<ReturnType<typeof account>>, writer: { submit: (p: Prepared) => Effect.Effect<unknown, unknown> }) =>
    app.run(Effect.gen(function*() {
      const p = yield* prepared(plainMessage(), [copyOf(a)])
      // Written now, not by its periodic flush among the counted statements (see startCounting).
      yield* flushKeyUse
      statements.length = 0
      yield* writer.submit(p).pipe(Effect.orDie)
      return statements.map((s) => s.split("(")[0]!)
    }))
  const deliveries = async (a: Awaited<ReturnType<typeof account>>) =>
    (await query(app, "SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE w.address_id = $1", [a.address.id])).length

  it("stores mail to addresses without follow-up work in one statement, and never leaves a subscription's work out", async () => {
    const a = await account(1000)
    await app.run(Effect.scoped(Effect.gen(function*() {
      const writer = yield* makeIngestWriter()
      // Nothing subscribed: the batch is one statement, no transaction and no second question.
      expect(yield* Effect.promise(() => submitted(a, writer))).toEqual(["SELECT ingest_batch_alone"])

      // A webhook this writer has not heard of (as if made on another instance): the statement
      // turns the batch away with nothing written, and the transaction stores it with its delivery.
      const hook = yield* Effect.promise(() =>
        query<{ id: number }>(app, "INSERT INTO webhooks (user_id, address_id, url, secret_sealed) VALUES ($1, $2, 'https://hooks.example/w', 'x') RETURNING id", [
          a.userId,
          a.address.id,
        ])
      )
      expect(yield* Effect.promise(() => submitted(a, writer))).toEqual([
        "SELECT ingest_batch_alone",
        "SELECT ingest_batch_bytes",
        "SELECT t FROM followup_subscriptions",
        "SELECT queue_webhook_deliveries",
      ])
      expect(yield* Effect.promise(() => deliveries(a))).toBe(1)
      // Known busy now: straight to the transaction.
      expect((yield* Effect.promise(() => submitted(a, writer)))[0]).toBe("SELECT ingest_batch_bytes")
      expect(yield* Effect.promise(() => deliveries(a))).toBe(2)

      // The webhook switched off: one more transaction finds nothing to queue, then one statement again.
      yield* Effect.promise(() => query(app, "UPDATE webhooks SET is_active = false WHERE id = $1", [hook[0]!.id]))
      expect(yield* Effect.promise(() => submitted(a, writer))).toEqual(["SELECT ingest_batch_bytes", "SELECT t FROM followup_subscriptions"])
      expect(yield* Effect.promise(() => submitted(a, writer))).toEqual(["SELECT ingest_batch_alone"])
    })))
    // Five messages, each stored once and charged once (the turned-away try wrote nothing).
    expect(await countMessages(app, a.userId)).toBe(5)
    expect(await balance(app, a.userId)).toBe(1000 - 5 * 5)
    const ledger = await query<{ n: number }>(app, "SELECT count(*)::int8 AS n FROM ledger_entries WHERE user_id = $1 AND kind = 'debit'", [a.userId])
    expect(ledger[0]!.n).toBe(5)
    expect(await deliveries(a)).toBe(2)
  })

  it("turns a batch away whole, with nothing written, when any of its addresses has follow-up work", async () => {
    const quiet = await account(1000)
    const hooked = await account(1000)
    await query(app, "INSERT INTO event_endpoints (user_id, url, secret_sealed, events) VALUES ($1, 'https://hooks.example/e', 'x', '[\"inbound.message_received\"]')", [
      hooked.userId,
    ])
    const [alone, other] = await app.run(Effect.gen(function*() {
      const db = yield* Database
      const batch = yield* Effect.forEach([quiet, hooked, quiet], (x, i) => prepared(plainMessage({ subject: `t${i}` }), [copyOf(x)]))
      const alone = yield* commitAlone(db, batch)
      const counts = [yield* Effect.promise(() => countMessages(app, quiet.userId)), yield* Effect.promise(() => balance(app, quiet.userId))]
      const alone2 = yield* commitAlone(db, [batch[0]!, batch[2]!])
      return [{ alone, counts }, alone2] as const
    }))
    expect(alone.alone).toBeUndefined()
    expect(alone.counts).toEqual([0, 1000])
    // Without the hooked address's message the same two go in one statement.
    expect(other?.outcomes.map((o) => o._tag)).toEqual(["Stored", "Stored"])
    expect(other?.quiet).toBe(true)
    expect(await countMessages(app, quiet.userId)).toBe(2)
    expect(await countMessages(app, hooked.userId)).toBe(0)
    expect(await balance(app, quiet.userId)).toBe(1000 - 2 * 5)
    expect(await balance(app, hooked.userId)).toBe(1000)
  })

  it("sees every kind of follow-up work, and only what is switched on", async () => {
    // Each kind, first switched off (the batch goes in alone), then on (turned away unwritten).
    const kinds: ReadonlyArray<{ name: string; off: string; on: string }> = [
      {
        name: "webhook",
        off: "INSERT INTO webhooks (user_id, address_id, url, secret_sealed, is_active) VALUES ($1, $2, 'https://hooks.example/w', 'x', false)",
        on: "UPDATE webhooks SET is_active = true WHERE address_id = $2 AND user_id = $1",
      },
      {
        name: "SMS rule",
        off: "INSERT INTO sms_rules (user_id, address_id, phone_number, provider_key_sealed, provider_key_prefix, is_active) VALUES ($1, $2, '+255700000001', 'x', 'x', false)",
        on: "UPDATE sms_rules SET is_active = true WHERE address_id = $2 AND user_id = $1",
      },
      {
        name: "agent",
        off: "INSERT INTO agent_configs (address_id, user_id, mode, enabled) VALUES ($2, $1, 'off', true)",
        on: "UPDATE agent_configs SET mode = 'draft' WHERE address_id = $2 AND user_id = $1",
      },
      {
        name: "agent switched off",
        off: "INSERT INTO agent_configs (address_id, user_id, mode, enabled) VALUES ($2, $1, 'auto', false)",
        on: "UPDATE agent_configs SET enabled = true WHERE address_id = $2 AND user_id = $1",
      },
      {
        name: "event endpoint",
        off: "INSERT INTO event_endpoints (user_id, url, secret_sealed, events, is_active) VALUES ($1, 'https://hooks.example/e', 'x', '[\"inbound.message_received\"]', false)",
        on: "UPDATE event_endpoints SET is_active = true WHERE user_id = $1",
      },
    ]
    for (const kind of kinds) {
      const quiet = await account(1000)
      const busy = await account(1000)
      // Each statement is given the parameters it names ($1 the account, $2 its address).
      const params = (sql: string) => (sql.includes("$2") ? [busy.userId, busy.address.id] : [busy.userId])
      await query(app, kind.off, params(kind.off))
      const commit = (...targets: ReadonlyArray<typeof quiet>) =>
        app.run(Effect.gen(function*() {
          const db = yield* Database
          const batch = yield* Effect.forEach(targets, (x, i) => prepared(plainMessage({ subject: `${kind.name} ${i}` }), [copyOf(x)]))
          return yield* commitAlone(db, batch)
        }))
      expect((await commit(quiet, busy))?.outcomes.map((o) => o._tag), `${kind.name} off`).toEqual(["Stored", "Stored"])
      await query(app, kind.on, params(kind.on))
      expect(await commit(quiet, busy), `${kind.name} on`).toBeUndefined()
      // Turned away whole: the quiet account's message of that batch was not written either.
      expect(await countMessages(app, quiet.userId), kind.name).toBe(1)
      expect(await countMessages(app, busy.userId), kind.name).toBe(1)
      expect(await balance(app, busy.userId), kind.name).toBe(1000 - 5)
    }
  })
})

describe("subscribers", () => {
  it("queue webhook deliveries in the commit and wake the worker right after it, only when something was queued", async () => {
    const a = await account(1000)
    const hook = await app.call("POST", "/api/webhook/webhooks", { token: a.apiKey, body: { address_id: a.address.id, url: "http://127.0.0.1:9/hook" } })
    expect(hook.status).toBe(201)
    const plain = await account(1000)
    const woken = (target: typeof a) =>
      app.run(Effect.gen(function*() {
        const signals = yield* WorkSignals
        // Drain a wake-up left by anything before.
        yield* signals.wait(WEBHOOK_QUEUE).pipe(Effect.timeout("10 millis"), Effect.ignore)
        const r = yield* commit([yield* prepared(plainMessage(), [copyOf(target)])])
        yield* r.afterCommit
        return yield* signals.wait(WEBHOOK_QUEUE).pipe(Effect.timeout("200 millis"), Effect.as(true), Effect.orElseSucceed(() => false))
      }))
    expect(await woken(plain)).toBe(false)
    expect(await woken(a)).toBe(true)
    const queued = await query(app, "SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE w.address_id = $1", [a.address.id])
    expect(queued).toHaveLength(1)
  })
})

describe("money promised at RCPT", () => {
  it("is held until the transaction ends, so two sessions cannot both be told yes for the last 5 TZS", async () => {
    const a = await account(5)
    const [one, two] = [newSessionState(), newSessionState()]
    const rcpt = (s: typeof one) => app.run(Effect.result(onRecipient(s, a.address.email)))
    expect((await rcpt(one))._tag).toBe("Success")
    const refused = await rcpt(two)
    expect(refused._tag === "Failure" && [refused.failure.code, refused.failure.message.slice(0, 5)]).toEqual([452, "4.2.2"])
    // The first session starts another transaction (RSET then MAIL FROM): its hold is let go.
    await app.run(onMailFrom(one))
    expect((await rcpt(two))._tag).toBe("Success")
    await app.run(endTransaction(two))
    expect((await rcpt(one))._tag).toBe("Success")
    await app.run(endTransaction(one))
  })
})
