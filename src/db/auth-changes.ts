/**
 * Adapters of the AuthChanges port (effects/auth/changes.ts). The triggers of migration
 * 023_auth_changes.sql NOTIFY `k|<key_hash>` or `u|<user_id>` on a channel named after the
 * schema (tests run many schemas on one database; channels are database-wide).
 *
 * PGlite: one process owns the database, and PGlite hands notifications over while the
 * committing statement's answer is parsed, so the cache has dropped the entry before the commit
 * returns: always live, nothing to wait for.
 *
 * PostgreSQL: several instances. Each keeps one connection of its own that LISTENs, and pings
 * itself through it every PING_MS. A cached principal is trusted only while the last ping
 * confirmed came back within LEASE_MS: notifications arrive in commit order, so having seen a
 * ping sent after a change committed proves the change was seen too. A revocation then settles:
 * it NOTIFYs a barrier, every live instance acknowledges it (after the change, in order), and the
 * answer waits for every instance it has heard from recently, at most LEASE_MS; an instance that
 * did not acknowledge by then has let its lease lapse and reads the database again.
 */
import { Effect } from "effect"
import { createHash, randomBytes } from "node:crypto"
import postgres from "postgres"
import type { AuthChange, AuthChangesShape } from "../../effects/auth/changes.ts"

const PING_MS = 250
const LEASE_MS = 2_000
/** Instances heard from within this window are waited for at a barrier. */
const PEER_WINDOW_MS = 10_000

/** The channel of one schema's changes (same expression as the trigger function). */
export const authChannel = (schema: string): string => `app_auth_${createHash("md5").update(schema).digest("hex").slice(0, 16)}`

/** Parses a trigger payload; other kinds (pings, barriers) are not changes. */
const parseChange = (payload: string): AuthChange | undefined => {
  if (payload.startsWith("k|")) return { kind: "key", hash: payload.slice(2) }
  if (payload.startsWith("u|")) return { kind: "user", id: Number(payload.slice(2)) }
  return undefined
}

export interface OpenedChanges {
  readonly changes: AuthChangesShape
  readonly close: () => Promise<void>
}

/** PGlite's `listen` (in process, or on its thread: ./pglite-thread.ts). */
export type PgliteListen = (channel: string, onPayload: (payload: string) => void) => Promise<() => Promise<void>>

export const pgliteAuthChanges = async (listen: PgliteListen, schema: string): Promise<OpenedChanges> => {
  let listener: ((c: AuthChange) => void) | undefined
  const unlisten = await listen(authChannel(schema), (payload) => {
    const change = parseChange(payload)
    if (change) listener?.(change)
  })
  return {
    changes: {
      subscribe: (l) => void (listener = l),
      live: () => true,
      // Delivered (as microtasks) before the commit's promise settled; one turn for good measure.
      settle: Effect.yieldNow,
    },
    close: () => unlisten().catch(() => undefined),
  }
}

interface Barrier {
  self: boolean
  expected: Set<string> | undefined
  readonly acks: Set<string>
  readonly done: () => void
}

export const postgresAuthChanges = async (url: string, schema: string): Promise<OpenedChanges> => {
  const channel = authChannel(schema)
  const instance = randomBytes(6).toString("hex")
  let listener: ((c: AuthChange) => void) | undefined
  let listening = false
  let confirmedAt = Number.NEGATIVE_INFINITY
  let seq = 0
  const sentAt = new Map<number, number>()
  const peers = new Map<string, number>()
  const barriers = new Map<string, Barrier>()

  const lapse = () => {
    listening = false
    confirmedAt = Number.NEGATIVE_INFINITY
    sentAt.clear()
  }

  const send = (payload: string) => sql.unsafe("SELECT pg_notify($1, $2)", [channel, payload])

  const settled = (b: Barrier) => {
    if (!b.self || !b.expected) return
    for (const p of b.expected) if (!b.acks.has(p)) return
    b.done()
  }

  const onNotify = (_channel: string, payload: string) => {
    const change = parseChange(payload)
    if (change) return listener?.(change)
    const [kind, from, arg] = payload.split("|") as [string, string, string]
    const now = performance.now()
    // An instance stopping says so, so barriers stop waiting for it at once.
    if (kind === "x") return void peers.delete(from)
    peers.set(from, now)
    if (kind === "p" && from === instance) {
      const sent = sentAt.get(Number(arg))
      if (sent !== undefined) {
        confirmedAt = Math.max(confirmedAt, sent)
        for (const s of sentAt.keys()) if (s <= Number(arg)) sentAt.delete(s)
      }
    } else if (kind === "b") {
      if (from !== instance) {
        send(`a|${instance}|${arg}`).catch(() => undefined)
        return
      }
      const b = barriers.get(arg)
      if (!b) return
      // Every ping committed before the barrier has been seen by now: these are the peers that
      // may still trust a cache filled before the change.
      b.self = true
      b.expected = new Set([...peers].filter(([id, seen]) => id !== instance && now - seen < PEER_WINDOW_MS).map(([id]) => id))
      settled(b)
    } else if (kind === "a") {
      const b = barriers.get(arg)
      if (b) {
        b.acks.add(from)
        settled(b)
      }
    }
  }

  // `onnotify` is the connection-level hook postgres.js's own `listen` uses; not in its typings.
  const sql = postgres(url, {
    max: 1,
    // Never closed on purpose: a reconnect forgets every cached principal.
    idle_timeout: 0,
    max_lifetime: null,
    fetch_types: false,
    onnotice: () => undefined,
    onnotify: onNotify,
    onclose: lapse,
  } as postgres.Options<{}>)

  const listen = async () => {
    if (listening) return
    await sql.unsafe(`LISTEN "${channel}"`)
    listening = true
    // Whatever changed while nobody listened is unknown: start over.
    listener?.({ kind: "reset" })
  }

  let stopped = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const tick = async () => {
    try {
      await listen()
      const n = ++seq
      sentAt.set(n, performance.now())
      await send(`p|${instance}|${n}`)
    } catch {
      lapse()
    }
    if (!stopped) timer = setTimeout(tick, PING_MS)
  }
  await listen()
  await tick()

  const settle = Effect.promise(async () => {
    const token = randomBytes(8).toString("hex")
    let done!: () => void
    const finished = new Promise<void>((resolve) => (done = resolve))
    barriers.set(token, { self: false, expected: undefined, acks: new Set(), done })
    let wait: ReturnType<typeof setTimeout> | undefined
    const lease = new Promise<void>((resolve) => (wait = setTimeout(resolve, LEASE_MS)))
    send(`b|${instance}|${token}`).catch(() => undefined)
    await Promise.race([finished, lease])
    clearTimeout(wait)
    barriers.delete(token)
  })

  return {
    changes: {
      subscribe: (l) => void (listener = l),
      live: () => listening && performance.now() - confirmedAt < LEASE_MS,
      settle,
    },
    close: async () => {
      stopped = true
      clearTimeout(timer)
      await send(`x|${instance}|`).catch(() => undefined)
      await sql.end({ timeout: 1 }).catch(() => undefined)
    },
  }
}
