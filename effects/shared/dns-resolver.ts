/**
 * The Dns port in the shape mailauth asks with: `(name, rrtype) => Promise<answers>` that
 * rejects with an error carrying the resolver's `code` (ENOTFOUND/ENODATA: no such record;
 * anything else: an outage). Every question mailauth asks (SPF includes, MX targets, DKIM keys,
 * DMARC policies) then goes through the port, and so to DNS_SERVERS in tests.
 */
import { Effect, Exit } from "effect"
import type { DNSResolver } from "mailauth"
import { Dns } from "../ports/Dns.ts"

export const mailauthResolver = (options: { readonly fresh?: boolean } = {}): Effect.Effect<DNSResolver, never, Dns> =>
  Effect.gen(function*() {
    const dns = yield* Dns
    const context = yield* Effect.context<never>()
    // Incoming mail may use the TTL cache; domain verification asks afresh (`fresh`).
    const ask = options.fresh ? dns.resolveFresh : dns.resolve
    return async (name, rrtype) => {
      const exit = await Effect.runPromiseExitWith(context)(ask(name, rrtype))
      if (Exit.isSuccess(exit)) return exit.value as Array<Array<string>>
      const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
      // The DnsError itself (an Error with the resolver's `code`): a cached "no such record" is
      // thrown again without building a new error, and its stack, for every message.
      throw failure && failure._tag === "Fail"
        ? failure.error
        : Object.assign(new Error(`DNS ${rrtype} ${name} failed`), { code: "ESERVFAIL" })
    }
  })
