/**
 * Several instances on one PostgreSQL database, each with its own ingest actor, taking mail for
 * the same accounts at once: messages to two accounts in both orders, wallets too small for all
 * of it. No deadlock (PostgreSQL's own counter stays put), no double charge, no overdraft, every
 * 250 stored once with its webhook delivery queued in the same commit, every refusal a 452.
 * PGlite serialises every transaction, so this only means something on a server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { onPostgres } from "../support/db.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "../support/dns-server.ts"
import { createAddress, fund, plainMessage, query } from "../support/inbound.ts"
import { restartableDatabase, type RestartableDatabase } from "../support/restartable-db.ts"
import { connectSmtp, dataBlock } from "../support/smtp-client.ts"

describe.skipIf(!onPostgres)("three instances on one PostgreSQL database", () => {
  let dns: TestDnsServer
  let database: RestartableDatabase
  let apps: Array<TestApp>
  beforeAll(async () => {
    dns = await startDnsServer(zoneFixture("platform.json"))
    database = restartableDatabase()
    const first = await makeTestApp({ workers: false, database: database.next(), settings: { dnsServers: [dns.address] } })
    const others = await Promise.all([1, 2].map(() =>
      makeTestApp({ workers: false, database: database.next(), settings: { dnsServers: [dns.address], secretsKey: first.settings.secretsKey } })
    ))
    apps = [first, ...others]
  })
  afterAll(async () => {
    for (const a of apps ?? []) await a.stop()
    await database?.drop()
    await dns?.close()
  })

  it("never deadlock, overdraw or charge twice; queue webhooks in the same commit", { timeout: 120_000 }, async () => {
    const [a] = apps as [TestApp, ...Array<TestApp>]
    const deadlocks = async () =>
      (await query<{ n: number }>(a, "SELECT pg_stat_clear_snapshot(), deadlocks::int8 AS n FROM pg_stat_database WHERE datname = current_database()"))[0]!.n
    const before = await deadlocks()

    // Two accounts, two addresses each; funds for about two thirds of the copies sent.
    const accounts = await Promise.all([0, 1].map(async (i) => {
      const acc = await createAccount(a)
      await fund(a, acc.userId, 5 * 60)
      const boxes = [await createAddress(a, acc.apiKey, `multi-${i}-a-${Date.now()}`), await createAddress(a, acc.apiKey, `multi-${i}-b-${Date.now()}`)]
      const hook = await a.call("POST", "/api/webhook/webhooks", { token: acc.apiKey, body: { address_id: boxes[0]!.id, url: "http://127.0.0.1:9/hook" } })
      expect(hook.status).toBe(201)
      return { ...acc, boxes }
    }))
    const all = accounts.flatMap((acc) => acc.boxes.map((b) => b.email))

    // 3 instances × 8 sessions × 6 messages, each to 2–4 of the four addresses in a shuffled order.
    const replies: Array<{ rcpts: Array<number>; data?: number; text?: string }> = []
    await Promise.all(apps.flatMap((app) =>
      Array.from({ length: 8 }, async (_, s) => {
        const smtp = await connectSmtp(app.ports.mx!)
        await smtp.command("EHLO multi.example.net")
        for (let n = 0; n < 6; n++) {
          const to = [...all].sort(() => Math.random() - 0.5).slice(0, 2 + ((s + n) % 3))
          await smtp.command("MAIL FROM:<a@sender.example>")
          const rcpts: Array<number> = []
          for (const r of to) rcpts.push((await smtp.command(`RCPT TO:<${r}>`)).code)
          if (!rcpts.includes(250)) {
            replies.push({ rcpts })
            await smtp.command("RSET")
            continue
          }
          await smtp.command("DATA")
          smtp.write(dataBlock(plainMessage({ subject: `multi ${s}.${n}` })))
          const r = await smtp.reply()
          replies.push({ rcpts, data: r.code, text: r.text })
        }
        smtp.destroy()
      })
    ))

    for (const r of replies) {
      for (const c of r.rcpts) expect([250, 452]).toContain(c)
      if (r.data !== undefined) expect([250, 452], r.text).toContain(r.data)
    }
    const acknowledged = replies.filter((r) => r.data === 250).flatMap((r) => /stored as ([\d,]+)/.exec(r.text!)![1]!.split(",").map(Number))
    expect(acknowledged.length).toBeGreaterThan(0)
    expect(new Set(acknowledged).size).toBe(acknowledged.length)

    for (const acc of accounts) {
      const [row] = await query<{ balance: number; ledger: number; debits: number; stored: number; counted: number }>(
        a,
        `SELECT (SELECT balance_tzs FROM wallets WHERE user_id = $1) AS balance,
                (SELECT sum(amount_tzs) FROM ledger_entries WHERE user_id = $1)::int8 AS ledger,
                (SELECT count(*) FROM ledger_entries WHERE user_id = $1 AND kind = 'debit')::int8 AS debits,
                (SELECT count(*) FROM inbound_messages WHERE user_id = $1)::int8 AS stored,
                (SELECT sum(message_count) FROM inbound_addresses WHERE user_id = $1)::int8 AS counted`,
        [acc.userId],
      )
      expect(row!.balance).toBe(row!.ledger)
      expect(row!.balance).toBeGreaterThanOrEqual(0)
      expect(row!.debits).toBe(row!.stored)
      expect(row!.counted).toBe(row!.stored)
      expect(row!.balance).toBe(5 * 60 - 5 * row!.stored)
    }
    const [stored] = await query<{ n: number }>(a, "SELECT count(*)::int8 AS n FROM inbound_messages WHERE id = ANY($1::int8[])", [acknowledged])
    expect(stored!.n).toBe(acknowledged.length)
    // Exactly one webhook delivery per message stored at a hooked address, written with it.
    const hooked = accounts.map((acc) => acc.boxes[0]!.id)
    const [hooks] = await query<{ messages: number; deliveries: number }>(
      a,
      `SELECT (SELECT count(*) FROM inbound_messages WHERE address_id = ANY($1::int8[]))::int8 AS messages,
              (SELECT count(*) FROM webhook_deliveries d JOIN inbound_messages m ON m.id = d.message_id WHERE m.address_id = ANY($1::int8[]))::int8 AS deliveries`,
      [hooked],
    )
    expect(hooks!.deliveries).toBe(hooks!.messages)
    expect(await deadlocks()).toBe(before)
    const count = (f: (r: (typeof replies)[number]) => boolean) => replies.filter(f).length
    console.log(
      `3 instances: ${replies.length} transactions, ${acknowledged.length} copies stored, ` +
        `${count((r) => r.data === 452)} refused at the end of DATA, ${count((r) => r.rcpts.includes(452))} with a recipient refused at RCPT`,
    )
  })
})
