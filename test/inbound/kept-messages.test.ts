/**
 * Small mail on PGlite under Node is prepared on the database's own thread and kept there
 * (src/ingest/kept-messages.ts): the writer's batch names it, and that thread builds the call's
 * parameters. Held here, through the service's own preparer and writer: such a message is stored
 * with exactly the rows and bytes of the same message prepared in hand, also beside one in hand
 * in one batch; and once its batch is answered it is let go, once. On PostgreSQL nothing is kept
 * (the same tests then hold the messages in hand to the same rows).
 */
import { Context, Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PrepareJob, ReadyMessage } from "../../effects/ingest/prepare.ts"
import { MessagePreparer } from "../../effects/ingest/preparer.ts"
import { commitAlone, type Prepared } from "../../effects/ingest/store.ts"
import { makeIngestWriter } from "../../effects/ingest/writer.ts"
import { Database } from "../../effects/ports/Database.ts"
import { LOOP_PREPARE_BYTES } from "../../src/config.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { onPostgres } from "../support/db.ts"
import { createAddress, fund, messageWithPdf, plainMessage, query, unique } from "../support/inbound.ts"

let app: TestApp
beforeAll(async () => {
  app = await makeTestApp({ workers: false })
})
afterAll(() => app.stop())

const account = async () => {
  const a = await createAccount(app)
  await fund(app, a.userId, 1000)
  const address = await createAddress(app, a.apiKey, unique("kept"))
  return { ...a, address }
}

const AT = Date.parse("2026-11-30T10:00:00Z")

/** The MX's job for `raw` (one id and time per message, so that two preparings of it match). */
const jobFor = (raw: string, id: string): PrepareJob => ({
  // Bytes of their own, as the MX has them: the pool moves them to its thread.
  source: { _tag: "Memory", bytes: new Uint8Array(Buffer.from(raw)) },
  mailFrom: "asha@sender.example",
  client: { ip: "127.0.0.1", helo: "sender.example", tls: null },
  mta: "mx.inbox.localhost",
  id,
  at: AT,
})

/** Every column a stored message has that its row or bytes decide, and its MIME row's. */
const storedAs = (ids: ReadonlyArray<number>) =>
  query(
    app,
    `SELECT m.subject, m.from_addr, m.envelope_from, m.text_body, m.html_body, m.size_bytes, m.headers, m.attachments,
            m.auth_results, m.received_at, x.size_bytes AS mime_size, md5(x.raw) AS raw,
            (SELECT json_agg(json_build_object('p', a.position, 'f', a.filename, 'c', md5(a.content)) ORDER BY a.position)
               FROM inbound_attachments a WHERE a.mime_id = x.id) AS parts
       FROM inbound_messages m JOIN inbound_mime x ON x.id = m.mime_id
      WHERE m.id = ANY ($1::int8[]) ORDER BY m.id`,
    [ids],
  )

/** The messages' one copy each, to `a`'s address, as the writer gets them. */
const toAccount = (a: Awaited<ReturnType<typeof account>>, messages: ReadonlyArray<ReadyMessage>): Array<Prepared> =>
  messages.map((message) => ({
    destinations: [{ addressId: a.address.id, userId: a.userId, email: a.address.email, retentionDays: 30, rcpt: a.address.email }],
    message,
    at: new Date(AT),
  }))

/**
 * Each of `raws` prepared twice, with the same job: by the service's preparer (kept on PGlite's
 * thread when small), and on the event loop (always in hand).
 */
const preparedBothWays = (raws: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const service = yield* MessagePreparer
    const inHand = Context.get(yield* Layer.build(MessagePreparer.inProcess), MessagePreparer)
    const jobs = raws.map((raw, i) => jobFor(raw, `kept${i}`))
    return {
      viaService: yield* Effect.forEach(jobs, (job) => service.prepare(job)),
      inHand: yield* Effect.forEach(raws, (raw, i) => inHand.prepare(jobFor(raw, `kept${i}`))),
    }
  })

describe("a message kept on the database's thread", () => {
  it("is stored by the writer with the very rows and bytes of the message prepared in hand, and let go once when answered", async () => {
    const a = await account()
    const raws = [plainMessage({ subject: "Habari ya kept" }), messageWithPdf("Ankara\r\nya mwezi")]
    const { kept, releases, storedKept, storedInHand } = await app.run(Effect.scoped(Effect.gen(function*() {
      const { viaService, inHand } = yield* preparedBothWays(raws)
      const releases = viaService.map(() => 0)
      const watched = viaService.map((m, i): ReadyMessage => ("kept" in m ? { ...m, release: () => (releases[i]!++, m.release()) } : m))
      const writer = yield* makeIngestWriter()
      const store = (messages: ReadonlyArray<ReadyMessage>) =>
        Effect.forEach(toAccount(a, messages), (p) => Effect.map(writer.submit(p), ([m]) => m!.id), { concurrency: "unbounded" })
      return { kept: viaService.map((m) => "kept" in m), releases, storedKept: yield* store(watched), storedInHand: yield* store(inHand) }
    })))
    // On PGlite under Node small mail stays on the database's thread; on PostgreSQL nothing does.
    expect(kept).toEqual(raws.map(() => !onPostgres))
    expect(releases).toEqual(onPostgres ? [0, 0] : [1, 1])
    expect(await storedAs(storedKept)).toEqual(await storedAs(storedInHand))
  })

  it("goes in one statement beside a message prepared on the event loop, each with its own bytes", async () => {
    const a = await account()
    // Over LOOP_PREPARE_BYTES: prepared on the event loop, its row and bytes in hand.
    const large = plainMessage({ subject: "Kubwa", body: "Habari za leo, ndugu.\r\n".repeat(Math.ceil(LOOP_PREPARE_BYTES / 20)) })
    expect(large.length).toBeGreaterThan(LOOP_PREPARE_BYTES)
    const raws = [plainMessage({ subject: "Ndogo" }), large, messageWithPdf("Ya tatu")]
    const { kept, storedKept, storedInHand } = await app.run(Effect.scoped(Effect.gen(function*() {
      const db = yield* Database
      const { viaService, inHand } = yield* preparedBothWays(raws)
      // One statement each (no subscription applies): the batch cannot be split.
      const store = (messages: ReadonlyArray<ReadyMessage>) =>
        Effect.map(commitAlone(db, toAccount(a, messages)), (done) => done!.outcomes.map((o) => (o._tag === "Stored" ? o.messages[0]!.id : -1)))
      const stored = { kept: viaService.map((m) => "kept" in m), storedKept: yield* store(viaService), storedInHand: yield* store(inHand) }
      for (const m of viaService) if ("kept" in m) m.release()
      return stored
    })))
    expect(kept).toEqual([!onPostgres, false, !onPostgres])
    const stored = await storedAs(storedKept)
    expect(stored.slice(0, 2).map((m) => m.subject)).toEqual(["Ndogo", "Kubwa"])
    expect(stored).toEqual(await storedAs(storedInHand))
  })
})
