/**
 * Crash recovery: the outbox row is written with the charge before dispatch, so a process that
 * dies while the provider holds the message leaves it `queued`. A new instance on the same
 * database re-dispatches it once its lease has passed (not before), charged once; a message out
 * of attempts, or whose sender is no longer allowed, is failed and refunded instead.
 */
import { Effect } from "effect"
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DISPATCH_LEASE } from "../../effects/outbound/dispatch.ts"
import { outboundWorkerSpec } from "../../src/workers/outbound.ts"
import { runOnce } from "../../src/workers/worker.ts"
import type { TestApp } from "../support/app.ts"
import { shiftedClock } from "../support/clock.ts"
import { restartableDatabase, type RestartableDatabase } from "../support/restartable-db.ts"
import {
  balance,
  eventually,
  expectLedgerConsistent,
  fundedAccount,
  makeOutboundApp,
  movements,
  query,
  rcpt,
  send,
  startHangingServer,
  startRelay,
  type TestRelay,
} from "./support.ts"

let relay: TestRelay
let db: RestartableDatabase
beforeAll(async () => {
  relay = await startRelay()
  db = restartableDatabase()
})
afterAll(async () => {
  await relay?.close()
  await db?.drop()
})

const recoverOnce = (app: TestApp) => app.run(Effect.flatMap(outboundWorkerSpec, runOnce))

describe("a crash between charge and provider answer", () => {
  it("is re-dispatched by the next instance after the lease, charged once; out-of-attempts and disallowed senders are refunded", async () => {
    // Instance 1: the relay takes the messages and never answers; then the process dies.
    const hang = await startHangingServer()
    const first = await makeOutboundApp({ relayUrl: hang.url, database: db.next() })
    const a = await fundedAccount(first, 100)
    const [x, y, z] = [rcpt("x"), rcpt("y"), rcpt("z")]
    const pdf = Buffer.from("%PDF-1.4 survives a crash \u0000\u00ff")
    const attachments = [{ filename: "receipt.pdf", content_type: "application/pdf", data_base64: pdf.toString("base64") }]
    const pending = [x, y, z].map((to) => send(first, a, { to: [to], subject: `crash ${to}`, text_body: "t", attachments }))
    await eventually(() => hang.messages() === 3)
    const queued = await query<{ id: number; to_addresses: Array<string> }>(
      first,
      "SELECT id, to_addresses FROM outbound_messages WHERE user_id = $1 AND status = 'queued' ORDER BY id",
      [a.userId],
    )
    expect(queued).toHaveLength(3)
    expect(await balance(first, a.userId)).toBe(85)
    await first.runtime.dispose() // the process dies: nothing more reaches the database
    await hang.close()
    await Promise.all(pending)
    await first.stop()

    // Instance 2 on the same database, with a working relay.
    const clock = shiftedClock()
    const second = await makeOutboundApp({ relayUrl: relay.url, database: db.next(), clock })
    try {
      const idOf = (email: string) => queued.find((q) => q.to_addresses[0] === email)!.id
      // Out of attempts, and a From that is no longer allowed.
      await query(second, "UPDATE outbound_messages SET attempts = 3 WHERE id = $1", [idOf(y)])
      await query(second, "UPDATE outbound_messages SET from_address = 'someone@gmail.com' WHERE id = $1", [idOf(z)])

      // Within the lease the rows are still the (dead) first instance's.
      expect(await recoverOnce(second)).toBe(0)
      expect(relay.received).toHaveLength(0)

      clock.advance(DISPATCH_LEASE)
      expect(await recoverOnce(second)).toBe(3)
      expect(relay.to(x)).toHaveLength(1)
      expect(relay.received).toHaveLength(1)
      // Rebuilt from the tables: same Message-ID, same attachment bytes.
      const parsed = await simpleParser(relay.to(x)[0]!.raw)
      expect(parsed.subject).toBe(`crash ${x}`)
      expect(parsed.attachments.map((p) => [p.filename, p.content.toString("hex")])).toEqual([["receipt.pdf", pdf.toString("hex")]])
      const [mid] = await query<{ message_id_header: string }>(second, "SELECT message_id_header FROM outbound_messages WHERE id = $1", [idOf(x)])
      expect(parsed.messageId).toBe(`<${mid!.message_id_header}>`)
      // Attachment bytes go once nothing of the content is queued any more.
      expect(await query(second, "SELECT 1 FROM outbound_attachments a JOIN outbound_messages m ON m.content_id = a.content_id WHERE m.user_id = $1", [a.userId])).toEqual([])
      const rows = await query<{ id: number; status: string; error_code: string | null; amount_tzs: number; attempts: number }>(
        second,
        "SELECT id, status, error_code, amount_tzs, attempts FROM outbound_messages WHERE user_id = $1 ORDER BY id",
        [a.userId],
      )
      const byId = Object.fromEntries(rows.map((r) => [r.id, r]))
      expect(byId[idOf(x)]).toMatchObject({ status: "sent", error_code: null, amount_tzs: 5, attempts: 2 })
      expect(byId[idOf(y)]).toMatchObject({ status: "failed", error_code: "DISPATCH_ABANDONED", amount_tzs: 0 })
      expect(byId[idOf(z)]).toMatchObject({ status: "failed", error_code: "SENDER_NOT_ALLOWED", amount_tzs: 0 })
      const recipient = await query<{ status: string; provider_code: number }>(second, "SELECT status, provider_code FROM outbound_recipients WHERE message_id = $1", [idOf(x)])
      expect(recipient).toEqual([{ status: "sent", provider_code: 250 }])

      // Charged once for x; y and z given back.
      expect(await balance(second, a.userId)).toBe(95)
      const ledger = await movements(second, a.userId)
      expect(ledger.filter((m) => m.kind === "debit")).toHaveLength(3)
      expect(ledger.filter((m) => m.kind === "refund").map((m) => m.reference_id).sort()).toEqual([String(idOf(y)), String(idOf(z))].sort())
      await expectLedgerConsistent(second)

      // Nothing left to do.
      clock.advance(DISPATCH_LEASE)
      expect(await recoverOnce(second)).toBe(0)
      expect(relay.received).toHaveLength(1)
    } finally {
      await second.stop()
    }
  })
})

describe("the worker and a live dispatch", () => {
  it("never takes a message its sender still holds, and purges Idempotency-Keys past 24 h", async () => {
    const clock = shiftedClock()
    const app = await makeOutboundApp({ relayUrl: relay.url, clock })
    try {
      const a = await fundedAccount(app, 100)
      relay.reset()
      const sent = await send(app, a, { to: [rcpt()], subject: "s", text_body: "t" }, { "idempotency-key": "k-1" })
      expect(sent.status).toBe(201)
      // A message put back to queued under a fresh lease is not the worker's.
      await query(app, "UPDATE outbound_messages SET status = 'queued', locked_until = $2 WHERE id = $1", [
        sent.body.data.id,
        new Date(clock.now() + 60_000),
      ])
      expect(await recoverOnce(app)).toBe(0)
      await query(app, "UPDATE outbound_messages SET status = 'sent', locked_until = NULL WHERE id = $1", [sent.body.data.id])

      expect(await query(app, "SELECT key FROM outbound_idempotency_keys WHERE user_id = $1", [a.userId])).toHaveLength(1)
      clock.advance("25 hours")
      await recoverOnce(app)
      expect(await query(app, "SELECT key FROM outbound_idempotency_keys WHERE user_id = $1", [a.userId])).toHaveLength(0)
      expect(relay.received).toHaveLength(1)
    } finally {
      await app.stop()
    }
  })
})
