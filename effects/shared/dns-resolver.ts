/**
 * The Dns port in the shape mailauth asks with: `(name, rrtype) => Promise<answers>` that
 * rejects with an error carrying the resolver's `code` (ENOTFOUND/ENODATA: no such record;
 * anything else: an outage). Every question mailauth asks (SPF includes, MX targets, DKIM keys,
 * DMARC policies) then goes through the port, and so to DNS_SERVERS in tests.
 */
import { Effect, Exit } from "effect"
import type { KeptResolver } from "../ingest/verdicts.ts"
import { Dns, type DnsError } from "../ports/Dns.ts"

export const mailauthResolver = (options: { readonly fresh?: boolean } = {}): Effect.Effect<KeptResolver, never, Dns> =>
  Effect.gen(function*() {
    const dns = yield* Dns
    const context = yield* Effect.context<never>()
    const answer = (exit: Exit.Exit<ReadonlyArray<unknown>, DnsError>, name: string, rrtype: string) => {
      if (Exit.isSuccess(exit)) return exit.value as Array<Array<string>>
      const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
      // The DnsError itself (an Error with the resolver's `code`): a cached "no such record" is
      // thrown again without building a new error, and its stack, for every message.
      throw failure && failure._tag === "Fail"
        ? failure.error
        : Object.assign(new Error(`DNS ${rrtype} ${name} failed`), { code: "ESERVFAIL" })
    }
    // Domain verification asks afresh, past the TTL cache.
    if (options.fresh) return async (name, rrtype) => answer(await Effect.runPromiseExitWith(context)(dns.resolveFresh(name, rrtype)), name, rrtype)
    // Incoming mail uses the TTL cache, and notes until when each answer may be kept (the memo of
    // verdicts keeps nothing longer: effects/ingest/verdicts.ts).
    const until = new Map<string, number>()
    const ask = async (name: string, rrtype: string) => {
      const { exit, keepMs } = await Effect.runPromiseWith(context)(dns.resolveKept(name, rrtype))
      const key = `${rrtype} ${name.toLowerCase()}`
      until.delete(key)
      until.set(key, performance.now() + keepMs)
      if (until.size > MAX_NOTED) until.delete(until.keys().next().value!)
      return answer(exit, name, rrtype)
    }
    return Object.assign(ask, { keptUntil: (name: string, rrtype: string) => until.get(`${rrtype} ${name.toLowerCase()}`) ?? 0 })
  })

/** Answers whose keep time the resolver remembers at most. */
const MAX_NOTED = 10_000
