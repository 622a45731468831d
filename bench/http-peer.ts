/**
 * The peer of the HTTP benchmark (bench/http.ts): the least a Hono app on the same engine must do
 * to answer these requests honestly. It hashes the presented key (SHA-256), reads the key row
 * (one query), reads the resource (a second query) and answers the same envelope. No cache, no
 * scopes, no logging, no Effect. Runs as its own process:
 *
 *   PEER_PORT=… DATABASE_URL=postgres://…  node bench/http-peer.ts
 *   PEER_PORT=… PEER_PGLITE_DIR=/path/to/data node bench/http-peer.ts
 */
import { serve } from "@hono/node-server"
import { Hono } from "hono"
import { createHash, randomBytes } from "node:crypto"
import postgres from "postgres"
import { openPglite } from "../src/db/pglite.ts"

type Query = (text: string, params: Array<unknown>) => Promise<Array<Record<string, any>>>

const open = async (): Promise<Query> => {
  if (process.env.DATABASE_URL) {
    // The pool at its best per STACK-NOTES.md: at least as many connections as concurrent clients.
    const sql = postgres(process.env.DATABASE_URL, { max: Number(process.env.PEER_POOL ?? 64), onnotice: () => undefined })
    return async (text, params) => Array.from(await sql.unsafe(text, params as Array<never>))
  }
  const { pg } = await openPglite({ dataDir: process.env.PEER_PGLITE_DIR! })
  return async (text, params) => (await pg.query<Record<string, any>>(text, params)).rows
}

const query = await open()
const app = new Hono()

const envelope = (data: unknown, pagination?: unknown) => ({
  success: true,
  data,
  ...(pagination ? { pagination } : {}),
  request_id: `req_${randomBytes(12).toString("hex")}`,
  timestamp: new Date().toISOString(),
})

/** The caller's account id, or undefined (401). */
const account = async (key: string | undefined): Promise<number | undefined> => {
  if (!key) return undefined
  const hash = createHash("sha256").update(key).digest("hex")
  const [row] = await query(
    `SELECT k.user_id FROM api_keys k JOIN users u ON u.id = k.user_id
      WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND u.disabled_at IS NULL`,
    [hash],
  )
  return row?.user_id
}

const COLUMNS = "id, address_id, user_id, from_addr, to_addr, subject, text_body, html_body, headers, attachments, is_read, received_at"

app.get("/api/billing/balance", async (c) => {
  const userId = await account(c.req.header("x-api-key"))
  if (userId === undefined) return c.json({ success: false }, 401)
  const [w] = await query("SELECT balance_tzs FROM wallets WHERE user_id = $1", [userId])
  return c.json(envelope({ balance_tzs: w?.balance_tzs ?? 0 }))
})

app.get("/api/inbound/messages/:id", async (c) => {
  const userId = await account(c.req.header("x-api-key"))
  if (userId === undefined) return c.json({ success: false }, 401)
  const [m] = await query(`SELECT ${COLUMNS} FROM inbound_messages WHERE id = $1`, [Number(c.req.param("id"))])
  if (!m || m.user_id !== userId) return c.json({ success: false }, 404)
  return c.json(envelope({ ...m, received_at: new Date(m.received_at).toISOString() }))
})

app.get("/api/inbound/messages", async (c) => {
  const userId = await account(c.req.header("x-api-key"))
  if (userId === undefined) return c.json({ success: false }, 401)
  const addressId = Number(c.req.query("address_id"))
  const page = Number(c.req.query("page") ?? 1)
  const perPage = Number(c.req.query("per_page") ?? 20)
  // The page, with the address's counter as the total (the owner check rides along).
  const rows = await query(
    `SELECT ${COLUMNS}, (SELECT message_count FROM inbound_addresses WHERE id = $1 AND user_id = $4) AS total
       FROM inbound_messages WHERE address_id = $1 ORDER BY -id LIMIT $2 OFFSET $3`,
    [addressId, perPage, (page - 1) * perPage, userId],
  )
  if (rows.length > 0 && rows[0]!.total === null) return c.json({ success: false }, 403)
  const total = Number(rows[0]?.total ?? 0)
  const data = rows.map(({ total: _, ...m }) => ({ ...m, received_at: new Date(m.received_at).toISOString() }))
  return c.json(envelope(data, { page, per_page: perPage, total, total_pages: Math.ceil(total / perPage) }))
})

serve({ fetch: app.fetch, port: Number(process.env.PEER_PORT), hostname: "127.0.0.1" }, () => console.log("peer ready"))
