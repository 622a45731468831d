/**
 * Live Dns adapter on node:dns. DNS_SERVERS entries may carry a port (`127.0.0.1:5353`,
 * `[::1]:5353`), which `Resolver.setServers` understands. Timeouts are short and bounded: a
 * lookup runs inside an SMTP transaction or an HTTP request, and a dead resolver must not hold
 * either for long.
 */
import { Effect, Layer } from "effect"
import { Resolver } from "node:dns/promises"
import { AppConfig } from "../../effects/config.ts"
import { Dns, DnsError, type MxRecord } from "../../effects/ports/Dns.ts"

export const dnsLayer = Layer.effect(
  Dns,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const resolver = new Resolver({ timeout: 2_000, tries: 2 })
    if (config.dnsServers.length > 0) resolver.setServers([...config.dnsServers])

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

    return Dns.of({
      txt: (name) => lookup(name, "TXT", () => resolver.resolveTxt(name)),
      mx: (name) => lookup(name, "MX", () => resolver.resolveMx(name) as Promise<Array<MxRecord>>),
      a: (name) => lookup(name, "A", () => resolver.resolve4(name)),
      resolve: (name, rrtype) => lookup(name, rrtype, () => resolver.resolve(name, rrtype) as Promise<Array<unknown>>),
    })
  }),
)
