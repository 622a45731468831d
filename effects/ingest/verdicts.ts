/**
 * Verdicts of unsigned mail, kept while they cannot change. For a message without a DKIM or ARC
 * signature, mailauth's answer (SPF, DMARC, `dkim=none`, `arc=none`, and the trace headers it
 * writes) is a function of the connection (client address, HELO), the MAIL FROM, this MX's name,
 * the message's From field(s) and DNS answers; nothing else in the message is read. Most mail
 * comes from a few senders, so the same question is asked again and again: it was ~0.2 ms of the
 * prepare thread's ~0.6 ms of CPU per 2 KiB message (bench/REPORT.md, MX ingest).
 *
 * An entry is kept only while every DNS answer it rests on may still be kept (the resolver says
 * until when: `keptUntil`), so a changed SPF or DMARC record counts exactly when the DNS cache
 * would let it; a verdict resting on an answer that may not be kept at all is not kept either.
 * Signed mail is never kept here: its DKIM verdict depends on every signed byte.
 *
 * The From fields are found by mailauth's own header parser (the same rows it reads them from),
 * so an entry is shared only by messages whose From fields mailauth sees as identical.
 */
import type { DNSResolver } from "mailauth"
// mailauth's header splitter (lib/tools.js, no `exports` map restricts it): the one its DKIM
// verifier reads From rows and signature rows with.
import { parseHeaders } from "mailauth/lib/tools.js"

/** A resolver that can also say until when (performance.now() ms) an answer it gave may be kept. */
export type KeptResolver = DNSResolver & {
  readonly keptUntil?: (name: string, rrtype: string) => number
}

export interface VerdictInput {
  readonly ip: string
  readonly helo: string
  readonly sender: string
  readonly mta: string
}

/** Entries kept at most (oldest dropped first). */
export const MAX_VERDICTS = 2_000

/**
 * The memo key of an unsigned header block, or undefined when mailauth would find a DKIM
 * signature or ARC set in it (then nothing is kept).
 */
export const verdictKey = (head: Buffer, input: VerdictInput): string | undefined => {
  const rows = parseHeaders(head).parsed
  const from: Array<string> = []
  for (const row of rows) {
    const key = row.key ?? ""
    if (key === "dkim-signature" || key.startsWith("arc-")) return undefined
    if (key === "from") from.push(row.line.toString("binary"))
  }
  return JSON.stringify([input.ip, input.helo, input.sender, input.mta, from])
}

export interface VerdictMemo<A> {
  readonly get: (key: string) => A | undefined
  /**
   * Asks `compute` with a resolver that notes every question, and keeps its answer while all the
   * answers it rests on may be kept (per `resolver.keptUntil`).
   */
  readonly compute: (key: string, resolver: KeptResolver, compute: (resolver: DNSResolver) => Promise<A>, keep: (a: A) => boolean) => Promise<A>
  readonly size: () => number
}

export const makeVerdictMemo = <A>(now: () => number = () => performance.now(), max = MAX_VERDICTS): VerdictMemo<A> => {
  const entries = new Map<string, { readonly until: number; readonly value: A }>()
  return {
    get: (key) => {
      const hit = entries.get(key)
      if (!hit) return undefined
      if (hit.until > now()) return hit.value
      entries.delete(key)
      return undefined
    },
    compute: async (key, resolver, compute, keep) => {
      const asked: Array<readonly [string, string]> = []
      const value = await compute((name, rrtype) => (asked.push([name, rrtype]), resolver(name, rrtype)))
      const keptUntil = resolver.keptUntil
      if (!keptUntil || !keep(value)) return value
      let until = Infinity
      for (const [name, rrtype] of asked) until = Math.min(until, keptUntil(name, rrtype))
      // Nothing asked (no DNS needed) still expires: the verdict is only as good as the last look.
      if (until === Infinity) until = now() + 60_000
      if (until > now()) {
        entries.delete(key)
        entries.set(key, { until, value })
        if (entries.size > max) entries.delete(entries.keys().next().value!)
      }
      return value
    },
    size: () => entries.size,
  }
}
