/**
 * Live Dns adapter. DNS_SERVERS entries may carry a port (`127.0.0.1:5353`, `[::1]:5353`);
 * without them the system's resolvers (node's `dns.getServers()`) are asked. Timeouts are short
 * and bounded: a lookup runs inside an SMTP transaction or an HTTP request, and a dead resolver
 * must not hold either for long.
 *
 * `resolve` (everything mailauth asks: SPF, DKIM, DMARC, ARC, PTR) goes through a cache that
 * honours the records' TTLs (capped at an hour): most mail comes from a few senders, and asking
 * the same SPF record for every message costs more than storing the message. Concurrent questions
 * for the same name share one query. A negative answer is kept as long as its SOA says (RFC 2308;
 * not at all without one); failures (SERVFAIL, timeouts) are never kept. Domain verification
 * (`txt`, `mx`, `a`, and `resolveFresh` for the SPF evaluation) always asks afresh: a customer who
 * just published a record must see it count.
 */
import { Clock, Deferred, Effect, Exit, Layer } from "effect"
import * as nodeDns from "node:dns"
import { Resolver } from "node:dns/promises"
import { AppConfig } from "../../effects/config.ts"
import { Dns, DnsError, type KeptAnswer, type MxRecord } from "../../effects/ports/Dns.ts"
import { ask, parseServer, WireError } from "./dns-wire.ts"

/** Longest an answer is kept, whatever its TTL says. */
export const MAX_TTL_SECONDS = 3_600
/** Answers kept at most; the oldest go first. */
export const MAX_ENTRIES = 10_000

const TIMEOUT_MS = 2_000
const TRIES = 2

interface Entry {
  readonly expiresAt: number
  readonly exit: Exit.Exit<ReadonlyArray<unknown>, DnsError>
}

export const dnsLayer = Layer.effect(
  Dns,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const resolver = new Resolver({ timeout: TIMEOUT_MS, tries: TRIES })
    if (config.dnsServers.length > 0) resolver.setServers([...config.dnsServers])
    const servers = (config.dnsServers.length > 0 ? config.dnsServers : nodeDns.getServers()).map(parseServer)

    const lookup = <A>(name: string, rrtype: string, f: () => Promise<A>) =>
      Effect.tryPromise({
        try: f,
        catch: (e) => {
          const err = e as { code?: unknown; message?: unknown }
          return new DnsError({
            message: typeof err?.message === "string" ? err.message : `DNS ${rrtype} lookup of ${name} failed`,
            code: typeof err?.code === "string" ? err.code : "EUNKNOWN",
            name,
            rrtype,
          })
        },
      })

    const cache = new Map<string, Entry>()
    const inFlight = new Map<string, Deferred.Deferred<KeptAnswer>>()

    /** Asks the servers; the exit and how many seconds it may be kept (0: not at all). */
    const fetch = (name: string, rrtype: string) =>
      Effect.promise(() =>
        ask(servers, name, rrtype, { timeoutMs: TIMEOUT_MS, tries: TRIES }).then(
          (a) => ({ exit: Exit.succeed(a.records as ReadonlyArray<unknown>), ttl: a.ttl ?? 0 }),
          (e: unknown) => {
            const err = e instanceof WireError ? e : new WireError("EUNKNOWN", String(e))
            const error = new DnsError({ message: `DNS ${rrtype} lookup of ${name}: ${err.message}`, code: err.code, name, rrtype })
            return { exit: Exit.fail(error) as Exit.Exit<ReadonlyArray<unknown>, DnsError>, ttl: err.ttl ?? 0 }
          },
        )
      )

    /** Asks the servers for `key`, keeps the answer for its TTL and hands it to whoever waits on `mine`. */
    const fetchAndKeep = Effect.fnUntraced(
      function*(key: string, name: string, rrtype: string, now: number, mine: Deferred.Deferred<KeptAnswer>) {
        const { exit, ttl } = yield* fetch(name, rrtype)
        const seconds = Math.min(Math.max(0, ttl), MAX_TTL_SECONDS)
        cache.delete(key)
        if (seconds > 0) {
          cache.set(key, { expiresAt: now + seconds * 1000, exit })
          if (cache.size > MAX_ENTRIES) cache.delete(cache.keys().next().value!)
        }
        const answer = { exit, keepMs: seconds * 1000 }
        yield* Deferred.succeed(mine, answer)
        return answer
      },
      // Whoever waits on this question is never left hanging (interrupt is a no-op once done).
      (effect, key, _name, _rrtype, _now, mine) =>
        Effect.ensuring(effect, Effect.andThen(Effect.sync(() => inFlight.delete(key)), Deferred.interrupt(mine))),
    )

    /** The cached answer or a fresh one, and how long it stays in the cache from now. */
    const resolveKept: (name: string, rrtype: string) => Effect.Effect<KeptAnswer> = Effect.fnUntraced(function*(name: string, rrtype: string) {
      const key = `${rrtype.toUpperCase()} ${name.toLowerCase().replace(/\.$/, "")}`
      const now = yield* Clock.currentTimeMillis
      const kept = cache.get(key)
      if (kept && kept.expiresAt > now) return { exit: kept.exit, keepMs: kept.expiresAt - now }
      const pending = inFlight.get(key)
      if (pending) return yield* Deferred.await(pending)
      const mine = yield* Deferred.make<KeptAnswer>()
      inFlight.set(key, mine)
      return yield* fetchAndKeep(key, name, rrtype, now, mine)
    })

    const resolve = (name: string, rrtype: string): Effect.Effect<ReadonlyArray<unknown>, DnsError> =>
      Effect.flatMap(resolveKept(name, rrtype), (a) => a.exit)

    return Dns.of({
      txt: (name) => lookup(name, "TXT", () => resolver.resolveTxt(name)),
      mx: (name) => lookup(name, "MX", () => resolver.resolveMx(name) as Promise<Array<MxRecord>>),
      a: (name) => lookup(name, "A", () => resolver.resolve4(name)),
      resolve,
      resolveKept,
      resolveFresh: (name, rrtype) => Effect.flatMap(fetch(name, rrtype), ({ exit }) => exit),
    })
  }),
)
