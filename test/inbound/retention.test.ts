import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RETENTION_BATCH, retentionWorker } from "../../src/workers/retention.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, transaction } from "../support/smtp-client.ts"
import { countMessages, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}`
const DAY = 86_400_000

/** One purge round at `Date.now() + ahead` ms; returns how many batches it took (0 or 1). */
const purge = (ahead = 0) =>
  app.api.run(
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now() + ahead)
      return yield* runOnce(retentionWorker("1 hour"))
    }).pipe(Effect.provide(TestClock.layer())),
  )

const withAttachment = (to: string) =>
  [
    "From: a@sender.example",
    `To: ${to}`,
    "Subject: with file",
    "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b"',
    "",
    "--b",
    "Content-Type: text/plain",
    "",
    "see attached",
    "--b",
    'Content-Type: application/octet-stream; name="data.bin"',
    "Content-Transfer-Encoding: base64",
    "",
    Buffer.from("retention test bytes").toString("base64"),
    "--b--",
    "",
  ].join("\r\n")

describe("retention worker", () => {
  it("deletes messages past their address's retention with their attachments and MIME, and nothing else", async () => {
    const { userId, apiKey } = await createAccount(app.api)
    await fund(app.api, userId, 1000)
    await app.api.call("PATCH", "/api/compliance/profile", { token: apiKey, body: { default_retention_days: 1 } })
    const short = await createAddress(app.api, apiKey, unique("short"))
    await app.api.call("PATCH", "/api/compliance/profile", { token: apiKey, body: { default_retention_days: 30 } })
    const long = await createAddress(app.api, apiKey, unique("long"))
    expect([short.retention_days, long.retention_days]).toEqual([1, 30])

    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO keep.example.net")
    for (const [to, raw] of [
      [[short.email], withAttachment(short.email)],
      [[short.email], plainMessage()],
      [[long.email], withAttachment(long.email)],
      [[short.email, long.email], withAttachment(short.email)], // one MIME row shared by both copies
    ] as const) {
      expect((await transaction(smtp, { from: "a@sender.example", to, raw })).data?.code).toBe(250)
    }
    smtp.destroy()
    expect(await countMessages(app.api, userId)).toBe(5)
    const attachments = () =>
      query<{ n: number }>(app.api, "SELECT count(*)::int8 AS n FROM inbound_attachments t JOIN inbound_mime m ON m.id = t.mime_id WHERE m.user_id = $1", [userId])
        .then((r) => r[0]!.n)
    const mimes = () => query<{ n: number }>(app.api, "SELECT count(*)::int8 AS n FROM inbound_mime WHERE user_id = $1", [userId]).then((r) => r[0]!.n)
    expect([await attachments(), await mimes()]).toEqual([3, 4])

    expect(await purge(12 * 60 * 60 * 1000)).toBe(0) // half a day: nothing due
    expect(await countMessages(app.api, userId)).toBe(5)

    expect(await purge(2 * DAY)).toBe(1)
    const left = await query<{ address_id: number }>(app.api, "SELECT address_id FROM inbound_messages WHERE user_id = $1", [userId])
    expect(left.map((r) => r.address_id)).toEqual([long.id, long.id])
    // The shared MIME row stays for the long address's copy; the short-only ones are gone.
    expect([await attachments(), await mimes()]).toEqual([2, 2])
    const list = await app.api.call("GET", `/api/inbound/messages?address_id=${short.id}`, { token: apiKey })
    expect(list.body.pagination.total).toBe(0)
    expect((await app.api.call("GET", `/api/inbound/messages?address_id=${long.id}&unread=true`, { token: apiKey })).body.pagination.total).toBe(2)

    await purge(31 * DAY)
    expect(await countMessages(app.api, userId)).toBe(0)
    expect([await attachments(), await mimes()]).toEqual([0, 0])
    const [counters] = await query<{ m: number; u: number }>(
      app.api,
      "SELECT sum(message_count)::int8 AS m, sum(unread_count)::int8 AS u FROM inbound_addresses WHERE user_id = $1",
      [userId],
    )
    expect(counters).toEqual({ m: 0, u: 0 })
  })

  it(`purges a backlog ${RETENTION_BATCH} messages per statement`, async () => {
    const { userId, apiKey } = await createAccount(app.api)
    const address = await createAddress(app.api, apiKey, unique("bulk"))
    await query(
      app.api,
      `INSERT INTO inbound_messages (address_id, user_id, subject, received_at, expires_at)
       SELECT $1, $2, 'bulk ' || g, now() - interval '40 days', now() - interval '10 days' FROM generate_series(1, 2500) g`,
      [address.id, userId],
    )
    await query(app.api, "UPDATE inbound_addresses SET message_count = 2500, unread_count = 2500 WHERE id = $1", [address.id])
    const remaining: Array<number> = []
    while ((await purge()) > 0) remaining.push(await countMessages(app.api, userId))
    expect(remaining).toEqual([1500, 500, 0])
    const [row] = await query<{ message_count: number }>(app.api, "SELECT message_count FROM inbound_addresses WHERE id = $1", [address.id])
    expect(row!.message_count).toBe(0)
  })
})
