/**
 * The DNS proof for a sending domain: our DKIM public key at mail._domainkey, an SPF policy
 * that ends `-all` and lets our mail server send, and a DMARC policy that quarantines or
 * rejects. Each lookup ends as a match, a miss or unknown (an outage), as for receiving
 * domains: only misses may suspend a verified domain.
 *
 * The matchers are strict where receivers are: a second SPF or DMARC record makes both invalid
 * (RFC 7208 4.5, RFC 7489 6.6.3), so it is a miss, not a match. Whether SPF lets our mail server
 * send is what a receiver would compute: mailauth evaluates the policy (include: chains, ip4/ip6
 * ranges, a, mx, redirect=, the 10-lookup limit) with every lookup through the Dns port.
 */
import { Effect } from "effect"
import { Dns } from "../ports/Dns.ts"
import { mailauthResolver } from "../shared/dns-resolver.ts"
import { judgeRecords, type Outcome, outcome, type RecordCheck } from "../shared/domain-verification.ts"
import { DKIM_SELECTOR } from "./schema.ts"

export type SendingRecord = "DKIM" | "SPF" | "DMARC"

export type SendingDnsCheck = RecordCheck<SendingRecord>

type TxtRecords = ReadonlyArray<ReadonlyArray<string>>

/**
 * A TXT record's text: its character-strings joined. Quote characters are dropped too, for
 * records pasted into a DNS console with their zone-file quoting (`"v=DKIM1; p=MII" "Bj…"`).
 */
const text = (record: ReadonlyArray<string>): string => record.join("").replace(/"/g, "").trim()

/** `v=DKIM1; k=rsa; p=…` → tag → value (names lowercased, values trimmed). */
export const tagList = (value: string): Map<string, string> => {
  const tags = new Map<string, string>()
  for (const part of value.split(";")) {
    const eq = part.indexOf("=")
    if (eq > 0) tags.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim())
  }
  return tags
}

/** Exactly one record at the selector, carrying our key in full (whitespace inside `p=` ignored). */
export const dkimMatches = (records: TxtRecords, publicKey: string): boolean => {
  if (records.length !== 1) return false
  const tags = tagList(text(records[0]!))
  const v = tags.get("v")
  const k = tags.get("k")
  return (v === undefined || v === "DKIM1") &&
    (k === undefined || k.toLowerCase() === "rsa") &&
    tags.get("p")?.replace(/\s+/g, "") === publicKey
}

const isSpf = (value: string) => /^v=spf1(\s|$)/i.test(value)

/** The one SPF record, ending `-all` (SPEC.md: a softer ending lets forged mail through). */
export const spfEndsWithFail = (records: TxtRecords): boolean => {
  const spf = records.map(text).filter(isSpf)
  return spf.length === 1 && spf[0]!.toLowerCase().split(/\s+/).at(-1) === "-all"
}

/** An evaluation past this is a temperror (unknown), not a verdict. */
const SPF_DEADLINE_MS = 15_000

/**
 * What receivers will conclude for mail from `ip` on behalf of `domain`: pass is a match,
 * temperror (a DNS outage on the way) is unknown, anything else (fail, softfail, neutral, none,
 * permerror: a broken include, too many lookups) is a miss.
 */
export const spfPasses = (domain: string, ip: string): Effect.Effect<Outcome, never, Dns> =>
  Effect.gen(function*() {
    const resolver = yield* mailauthResolver({ fresh: true })
    // Loaded on first use: mailauth is ~30 MB resident, and the event loop needs it for this alone
    // (received mail is authenticated on the prepare threads).
    const result = yield* Effect.tryPromise(() => import("mailauth")).pipe(Effect.flatMap(({ spf }) => Effect.tryPromise(() =>
      spf({ sender: `postmaster@${domain}`, helo: domain, ip, mta: domain, resolver, maxElapsedTime: SPF_DEADLINE_MS })
    )), Effect.map((r) => r.status.result), Effect.orElseSucceed(() => "temperror"))
    return result === "pass" ? "match" : result === "temperror" ? "unknown" : "miss"
  })

/** One SPF record ending `-all` that passes our mail server. */
export const spfOutcome = (domain: string, mailServerIp: string): Effect.Effect<Outcome, never, Dns> =>
  Effect.gen(function*() {
    const dns = yield* Dns
    const policy = yield* outcome(dns.txt(domain), spfEndsWithFail)
    return policy === "match" ? yield* spfPasses(domain, mailServerIp) : policy
  })

/** The one DMARC record, with policy `p=quarantine` or `p=reject`. */
export const dmarcMatches = (records: TxtRecords): boolean => {
  const dmarc = records.map(text).filter((v) => /^v\s*=\s*DMARC1\s*(;|$)/i.test(v))
  if (dmarc.length !== 1) return false
  const p = tagList(dmarc[0]!).get("p")?.toLowerCase()
  return p === "quarantine" || p === "reject"
}

export const checkSendingDomain = (
  input: { readonly domain: string; readonly publicKey: string; readonly mailServerIp: string },
): Effect.Effect<SendingDnsCheck, never, Dns> =>
  Effect.gen(function*() {
    const dns = yield* Dns
    return yield* judgeRecords<SendingRecord, Dns>({
      DKIM: outcome(dns.txt(`${DKIM_SELECTOR}._domainkey.${input.domain}`), (r) => dkimMatches(r, input.publicKey)),
      SPF: spfOutcome(input.domain, input.mailServerIp),
      DMARC: outcome(dns.txt(`_dmarc.${input.domain}`), dmarcMatches),
    })
  })
