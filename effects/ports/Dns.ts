/**
 * The Dns port: real DNS queries for domain verification and for SPF/DKIM/DMARC checks of
 * incoming mail. The live adapter (src/providers/dns.ts) asks the servers in DNS_SERVERS (or the
 * system resolver); tests point it at a DNS server on loopback.
 */
import { Context, type Effect, type Exit, Schema } from "effect"

/** A failed lookup. `code` is the resolver's (ENOTFOUND, ENODATA, ETIMEOUT, ESERVFAIL, …). */
export class DnsError extends Schema.TaggedError<DnsError>()("DnsError", {
  message: Schema.String,
  code: Schema.String,
  name: Schema.String,
  rrtype: Schema.String,
}) {}

/** True when DNS answered that the name or record does not exist (not an outage). */
export const isNoRecord = (e: DnsError): boolean => e.code === "ENOTFOUND" || e.code === "ENODATA"

export interface MxRecord {
  readonly exchange: string
  readonly priority: number
}

export interface DnsShape {
  /** TXT records, each a list of its character-strings (join them to read the value). */
  readonly txt: (name: string) => Effect.Effect<ReadonlyArray<ReadonlyArray<string>>, DnsError>
  readonly mx: (name: string) => Effect.Effect<ReadonlyArray<MxRecord>, DnsError>
  /** IPv4 addresses. */
  readonly a: (name: string) => Effect.Effect<ReadonlyArray<string>, DnsError>
  /**
   * Any record type, answered in the shapes of node:dns `resolve(name, rrtype)`; mailauth asks
   * through this (SPF includes, DKIM keys, DMARC policies, PTR).
   */
  readonly resolve: (name: string, rrtype: string) => Effect.Effect<ReadonlyArray<unknown>, DnsError>
  /**
   * `resolve`'s answer, failure included, with how much longer it may be kept (ms; 0: not at
   * all): for a cache in front of this one (the prepare threads keep answers only that long).
   */
  readonly resolveKept: (name: string, rrtype: string) => Effect.Effect<KeptAnswer>
  /**
   * `resolve` asked afresh, past any cache: domain verification, where a record the customer just
   * published must count at once.
   */
  readonly resolveFresh: (name: string, rrtype: string) => Effect.Effect<ReadonlyArray<unknown>, DnsError>
}

export interface KeptAnswer {
  readonly exit: Exit.Exit<ReadonlyArray<unknown>, DnsError>
  readonly keepMs: number
}

export class Dns extends Context.Service<Dns, DnsShape>()("app/Dns") {}
