/**
 * The DNS proof for a receiving domain: the TXT token on the domain, an MX pointing at the
 * platform's mx host, and that host's A record at the mail server IP. Each lookup ends as a
 * match, a definitive miss (no such record, or a different value) or an outage; only misses may
 * suspend a verified domain, an outage leaves it as it is.
 */
import { Effect } from "effect"
import { Dns, type DnsError, isNoRecord } from "../ports/Dns.ts"

export type RecordType = "TXT" | "MX" | "A"

export interface DnsCheck {
  readonly ok: boolean
  /** Records DNS answered without the expected value. */
  readonly missing: ReadonlyArray<RecordType>
  /** Records whose lookup failed (timeout, SERVFAIL): unknown, not missing. */
  readonly unknown: ReadonlyArray<RecordType>
}

const hostEq = (a: string, b: string) => a.toLowerCase().replace(/\.$/, "") === b.toLowerCase().replace(/\.$/, "")

/** One lookup judged: the expected value, a definitive miss, or unknown (an outage). */
export type Outcome = "match" | "miss" | "unknown"

export const outcome = <A>(lookup: Effect.Effect<A, DnsError>, matches: (a: A) => boolean): Effect.Effect<Outcome> =>
  lookup.pipe(
    Effect.map((a): Outcome => (matches(a) ? "match" : "miss")),
    Effect.catch((e: DnsError) => Effect.succeed<Outcome>(isNoRecord(e) ? "miss" : "unknown")),
  )

export const checkReceivingDomain = (input: {
  readonly domain: string
  readonly token: string
  readonly mxHost: string
  readonly mailServerIp: string
}) =>
  Effect.gen(function*() {
    const dns = yield* Dns
    const expectedTxt = `mail-verify=${input.token}`
    const results = yield* Effect.all(
      {
        TXT: outcome(dns.txt(input.domain), (records) => records.some((chunks) => chunks.join("").trim() === expectedTxt)),
        MX: outcome(dns.mx(input.domain), (records) => records.some((r) => hostEq(r.exchange, input.mxHost))),
        A: outcome(dns.a(input.mxHost), (ips) => ips.includes(input.mailServerIp)),
      },
      { concurrency: "unbounded" },
    )
    const entries = Object.entries(results) as Array<[RecordType, Outcome]>
    return {
      ok: entries.every(([, o]) => o === "match"),
      missing: entries.filter(([, o]) => o === "miss").map(([t]) => t),
      unknown: entries.filter(([, o]) => o === "unknown").map(([t]) => t),
    } satisfies DnsCheck
  })
