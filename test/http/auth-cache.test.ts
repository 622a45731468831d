/**
 * The principal cache (effects/auth/cache.ts): an authenticated request reads only its resource,
 * and a revoked, expired, re-scoped or deleted key or a disabled account is refused on the very
 * next request, whoever made the change (the API, SQL through the Database port, the operator
 * CLI) and, on PostgreSQL, whichever instance takes the request.
 */
import { Context, Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuthChanges } from "../../effects/auth/changes.ts"
import { Database } from "../../effects/ports/Database.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { shiftedClock } from "../support/clock.ts"
import { onPostgres, type TestDatabase, testDatabase } from "../support/db.ts"
import { restartableDatabase, type RestartableDatabase } from "../support/restartable-db.ts"

/**
 * Wraps a database layer so the test sees every statement the app sends, and can take the
 * change listener down (`listener.down = true`: AuthChanges stops vouching for the cache).
 */
const counting = (db: TestDatabase) => {
  const statements: Array<string> = []
  const listener = { down: false }
  const layer = Layer.effectContext(Effect.gen(function*() {
    const ctx = (yield* Layer.build(db.layer)) as Context.Context<Database | AuthChanges>
    const inner = Context.get(ctx, Database)
    const changes = Context.get(ctx, AuthChanges)
    const counted = Database.of({ ...inner, query: (text, params) => (statements.push(text), inner.query(text, params)) })
    return ctx.pipe(
      Context.add(Database, counted),
      Context.add(AuthChanges, AuthChanges.of({ ...changes, live: () => !listener.down && changes.live() })),
    )
  }))
  return { database: { layer, drop: db.drop }, statements, listener }
}

/** Until this instance's listener vouches for its cache (at once on PGlite; the first ping on PostgreSQL). */
const untilLive = async (api: TestApp) => {
  for (let i = 0; i < 200; i++) {
    // AuthChanges is optional to the services (Effect.serviceOption), so not part of AppServices.
    const live = Effect.map(Effect.serviceOption(AuthChanges), (c) => c._tag === "Some" && c.value.live())
    if (await api.run(live)) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error("the auth change listener never became live")
}

const sql = (api: TestApp, text: string, params: ReadonlyArray<unknown> = []) => api.run(Database.use((db) => db.query(text, params)))
const balance = (api: TestApp, headers: Record<string, string>) => api.call("GET", "/api/billing/balance", { headers })
const key = (a: TestAccount) => ({ "x-api-key": a.apiKey })

describe("one instance", () => {
  const clock = shiftedClock()
  let api: TestApp
  let statements: Array<string>
  let listener: { down: boolean }
  beforeAll(async () => {
    const c = counting(testDatabase())
    statements = c.statements
    listener = c.listener
    api = await makeTestApp({ workers: false, database: c.database, infrastructure: clock.layer as Layer.Layer<any, never, never> })
    await untilLive(api)
  })
  afterAll(() => api.stop())

  it("answers a known key from memory: the request reads its resource only", async () => {
    const a = await createAccount(api)
    expect((await balance(api, key(a))).status).toBe(200)
    statements.length = 0
    const again = await balance(api, key(a))
    expect(again.status).toBe(200)
    expect(again.body.data).toEqual({ balance_tzs: 0 })
    expect(statements).toEqual(["SELECT balance_tzs FROM wallets WHERE user_id = $1"])
    // A JWT on a Key endpoint: the account's state comes from memory too.
    expect((await balance(api, { authorization: `Bearer ${a.token}` })).status).toBe(200)
    statements.length = 0
    expect((await balance(api, { authorization: `Bearer ${a.token}` })).status).toBe(200)
    expect(statements).toEqual(["SELECT balance_tzs FROM wallets WHERE user_id = $1"])
  })

  it("refuses a key revoked through the API on the next request, every header form", async () => {
    const a = await createAccount(api)
    for (let i = 0; i < 3; i++) expect((await balance(api, key(a))).status).toBe(200)
    const revoked = await api.call("DELETE", `/api/apikeys/${a.apiKeyId}`, { token: a.token })
    expect(revoked.status).toBe(200)
    for (const headers of [key(a), { authorization: `Bearer ${a.apiKey}` }, { authorization: a.apiKey }]) {
      const r = await balance(api, headers)
      expect(r.status).toBe(401)
      expect(r.body.errors[0].code).toBe("UNAUTHORIZED")
    }
  })

  it("refuses keys and tokens of an account disabled by SQL at once, and serves them again once enabled", async () => {
    const a = await createAccount(api)
    expect((await balance(api, key(a))).status).toBe(200)
    expect((await balance(api, { authorization: `Bearer ${a.token}` })).status).toBe(200)
    await sql(api, "UPDATE users SET disabled_at = now() WHERE id = $1", [a.userId])
    for (const headers of [key(a), { authorization: `Bearer ${a.token}` }]) {
      const r = await balance(api, headers)
      expect(r.status).toBe(403)
      expect(r.body.errors[0].code).toBe("ACCOUNT_DISABLED")
    }
    await sql(api, "UPDATE users SET disabled_at = NULL WHERE id = $1", [a.userId])
    expect((await balance(api, key(a))).status).toBe(200)
  })

  it("refuses a cached key once its expiry passes, and follows a changed expiry or scopes at once", async () => {
    const a = await createAccount(api)
    await sql(api, "UPDATE api_keys SET expires_at = $2 WHERE id = $1", [a.apiKeyId, new Date(clock.now() + 60_000)])
    expect((await balance(api, key(a))).status).toBe(200)
    clock.advance("61 seconds")
    const expired = await balance(api, key(a))
    expect(expired.status).toBe(401)
    expect(expired.body.errors[0].message).toMatch(/expired/)
    await sql(api, "UPDATE api_keys SET expires_at = NULL WHERE id = $1", [a.apiKeyId])
    expect((await balance(api, key(a))).status).toBe(200)
    await sql(api, "UPDATE api_keys SET scopes = 'inbound:read' WHERE id = $1", [a.apiKeyId])
    const scoped = await balance(api, key(a))
    expect(scoped.status).toBe(403)
    expect(scoped.body.errors[0].code).toBe("FORBIDDEN")
  })

  it("forgets a deleted key and a deleted account", async () => {
    const a = await createAccount(api)
    const b = await createAccount(api)
    expect((await balance(api, key(a))).status).toBe(200)
    expect((await balance(api, key(b))).status).toBe(200)
    await sql(api, "DELETE FROM api_keys WHERE id = $1", [a.apiKeyId])
    await sql(api, "DELETE FROM users WHERE id = $1", [b.userId])
    expect((await balance(api, key(a))).status).toBe(401)
    expect((await balance(api, key(b))).status).toBe(401)
    expect((await balance(api, { authorization: `Bearer ${b.token}` })).status).toBe(401)
  })

  it("writes last_used_at in batches, current whenever keys are listed", async () => {
    const a = await createAccount(api)
    expect((await balance(api, key(a))).status).toBe(200)
    const listed = await api.call("GET", "/api/apikeys", { token: a.token })
    const used = listed.body.data.find((k: { id: number }) => k.id === a.apiKeyId)
    expect(Date.parse(used.last_used_at)).toBeGreaterThan(clock.now() - 60_000)
    // The update does not wake the caches (no trigger on last_used_at): the key stays in memory.
    statements.length = 0
    expect((await balance(api, key(a))).status).toBe(200)
    expect(statements).toEqual(["SELECT balance_tzs FROM wallets WHERE user_id = $1"])
  })

  it("reads the database on every request while the listener cannot vouch for the cache (fail safe)", async () => {
    const a = await createAccount(api)
    expect((await balance(api, key(a))).status).toBe(200)
    listener.down = true
    try {
      statements.length = 0
      expect((await balance(api, key(a))).status).toBe(200)
      expect(statements.some((s) => /FROM api_keys k JOIN users u/.test(s))).toBe(true)
      // A change while down is refused from the database, and stays refused once up again.
      await sql(api, "UPDATE api_keys SET revoked_at = now() WHERE id = $1", [a.apiKeyId])
      expect((await balance(api, key(a))).status).toBe(401)
    } finally {
      listener.down = false
    }
    expect((await balance(api, key(a))).status).toBe(401)
  })

  it("leaves other keys cached when one key or account changes", async () => {
    const a = await createAccount(api)
    const b = await createAccount(api)
    expect((await balance(api, key(a))).status).toBe(200)
    expect((await balance(api, key(b))).status).toBe(200)
    await sql(api, "UPDATE users SET disabled_at = now() WHERE id = $1", [a.userId])
    statements.length = 0
    expect((await balance(api, key(b))).status).toBe(200)
    expect(statements).toEqual(["SELECT balance_tzs FROM wallets WHERE user_id = $1"])
  })
})

describe.skipIf(!onPostgres)("two instances on one PostgreSQL schema", () => {
  let database: RestartableDatabase
  let a: TestApp
  let b: TestApp
  beforeAll(async () => {
    database = restartableDatabase()
    a = await makeTestApp({ workers: false, database: database.next() })
    b = await makeTestApp({ workers: false, database: database.next(), settings: { jwtSecret: a.settings.jwtSecret } })
    await Promise.all([untilLive(a), untilLive(b)])
    // Each has heard the other's pings (barriers wait for instances they know of).
    await new Promise((r) => setTimeout(r, 600))
  })
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await database?.drop()
  })

  it("a key revoked on one instance is refused by the other on the very next request", async () => {
    for (let round = 0; round < 5; round++) {
      const acc = await createAccount(a)
      for (const api of [a, b, b]) expect((await balance(api, key(acc))).status).toBe(200)
      const revoked = await a.call("POST", `/api/apikeys/${acc.apiKeyId}/revoke`, { token: acc.token })
      expect(revoked.status).toBe(200)
      expect((await balance(b, key(acc))).status).toBe(401)
      expect((await balance(a, key(acc))).status).toBe(401)
    }
  })

  it("an account disabled through one instance's database is refused by the other at once", async () => {
    for (let round = 0; round < 5; round++) {
      const acc = await createAccount(a)
      for (const api of [a, b, b]) expect((await balance(api, key(acc))).status).toBe(200)
      expect((await balance(b, { authorization: `Bearer ${acc.token}` })).status).toBe(200)
      await sql(a, "UPDATE users SET disabled_at = now() WHERE id = $1", [acc.userId])
      for (const headers of [key(acc), { authorization: `Bearer ${acc.token}` }]) {
        expect((await balance(b, headers)).body.errors?.[0].code).toBe("ACCOUNT_DISABLED")
      }
    }
  })

  it("ignores the changes of other schemas on the same database", async () => {
    const other = await makeTestApp({ workers: false })
    try {
      await untilLive(other)
      const acc = await createAccount(a)
      expect((await balance(b, key(acc))).status).toBe(200)
      // Same ids exist in the other schema: its changes must not touch this one's caches, nor the reverse.
      const stranger = await createAccount(other)
      await sql(other, "UPDATE users SET disabled_at = now() WHERE id = $1", [stranger.userId])
      expect((await balance(b, key(acc))).status).toBe(200)
      expect((await balance(other, key(stranger))).status).toBe(403)
    } finally {
      await other.stop()
    }
  })
})
