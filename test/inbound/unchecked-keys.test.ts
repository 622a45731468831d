/**
 * The rows ingest writes have no foreign keys to check on insert (migration 041: the checks were
 * ~15 % of a 30-message batch call). What the keys gave stays: every stored copy names an
 * address, an owner and a MIME row that exist; deleting an address or an account takes what
 * hangs off it (the cascades, now triggers); and a purge never drops a MIME row a message still
 * refers to, whatever its reference count says.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { purgeMessages } from "../../effects/messages/purge.ts"
import { createAccount } from "../support/accounts.ts"
import { countMessages, createAddress, fund, type InboundTestApp, plainMessage, query, startInboundApp, unique } from "../support/inbound.ts"
import { sendRaw } from "../support/smtp-client.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp()
})
afterAll(() => app.stop())

/** An account with `addresses` funded addresses, each sent `each` messages over SMTP. */
const mailbox = async (addresses: number, each: number) => {
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, 1_000)
  const boxes = []
  for (let i = 0; i < addresses; i++) {
    const box = await createAddress(app.api, account.apiKey, unique("keys"))
    for (let k = 0; k < each; k++) {
      const sent = await sendRaw(app.mx, { from: "alice@sender.example", to: [box.email], raw: plainMessage({ to: box.email, subject: `k${k}` }) })
      expect(sent.data?.code, sent.data?.text).toBe(250)
    }
    boxes.push(box)
  }
  return { account, boxes }
}

const count = async (sql: string, params: ReadonlyArray<unknown>) => Number((await query<{ n: number }>(app.api, sql, params))[0]!.n)

describe("received mail's rows without foreign key checks", () => {
  it("name an address, an owner and a MIME row that exist", async () => {
    const { account } = await mailbox(2, 2)
    expect(await countMessages(app.api, account.userId)).toBe(4)
    const orphans = await count(
      `SELECT count(*)::int8 AS n
         FROM inbound_messages c
         LEFT JOIN inbound_addresses a ON a.id = c.address_id AND a.user_id = c.user_id
         LEFT JOIN users u ON u.id = c.user_id
         LEFT JOIN inbound_mime m ON m.id = c.mime_id AND m.user_id = c.user_id
        WHERE c.user_id = $1 AND (a.id IS NULL OR u.id IS NULL OR m.id IS NULL)`,
      [account.userId],
    )
    expect(orphans).toBe(0)
  })

  it("go with their address when its row is deleted", async () => {
    const { account, boxes } = await mailbox(2, 2)
    await query(app.api, "DELETE FROM inbound_addresses WHERE id = $1", [boxes[0]!.id])
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_messages WHERE address_id = $1", [boxes[0]!.id])).toBe(0)
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_messages WHERE address_id = $1", [boxes[1]!.id])).toBe(2)
    expect(await countMessages(app.api, account.userId)).toBe(2)
  })

  it("go with their account, MIME rows and all", async () => {
    const { account } = await mailbox(2, 1)
    const other = await mailbox(1, 1)
    await query(app.api, "DELETE FROM users WHERE id = $1", [account.userId])
    expect(await countMessages(app.api, account.userId)).toBe(0)
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_mime WHERE user_id = $1", [account.userId])).toBe(0)
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_addresses WHERE user_id = $1", [account.userId])).toBe(0)
    expect(await countMessages(app.api, other.account.userId)).toBe(1)
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_mime WHERE user_id = $1", [other.account.userId])).toBe(1)
  })

  it("keep a MIME row a message still refers to through a purge, even with its count at zero", async () => {
    const { account, boxes } = await mailbox(1, 2)
    const rows = await query<{ id: number; mime_id: number }>(
      app.api,
      "SELECT id, mime_id FROM inbound_messages WHERE address_id = $1 ORDER BY id",
      [boxes[0]!.id],
    )
    const [kept, purged] = rows
    // A count gone wrong: the MIME row of a message still stored says nothing refers to it.
    await query(app.api, "UPDATE inbound_mime SET message_refs = 0 WHERE id = $1", [kept!.mime_id])
    expect(await app.api.run(purgeMessages("SELECT $1::int8", [purged!.id]))).toBe(1)
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_mime WHERE id = $1", [purged!.mime_id])).toBe(0)
    expect(await count("SELECT count(*)::int8 AS n FROM inbound_mime WHERE id = $1", [kept!.mime_id])).toBe(1)
    const raw = await fetch(`${app.api.url}/api/inbound/messages/${kept!.id}/raw`, { headers: { authorization: `Bearer ${account.apiKey}` } })
    expect(raw.status).toBe(200)
    expect(await raw.text()).toContain("Subject: k0")
  })
})
