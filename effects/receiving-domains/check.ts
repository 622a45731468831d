/**
 * The DNS proof for a receiving domain: the TXT token on the domain, an MX pointing at the
 * platform's mx host, and that host's A record at the mail server IP.
 */
import { Effect } from "effect"
import { Dns } from "../ports/Dns.ts"
import { judgeRecords, outcome, type RecordCheck } from "../shared/domain-verification.ts"

export type RecordType = "TXT" | "MX" | "A"

export type DnsCheck = RecordCheck<RecordType>

const hostEq = (a: string, b: string) => a.toLowerCase().replace(/\.$/, "") === b.toLowerCase().replace(/\.$/, "")

export const checkReceivingDomain = (input: {
  readonly domain: string
  readonly token: string
  readonly mxHost: string
  readonly mailServerIp: string
}): Effect.Effect<DnsCheck, never, Dns> =>
  Effect.gen(function*() {
    const dns = yield* Dns
    const expectedTxt = `mail-verify=${input.token}`
    return yield* judgeRecords<RecordType, never>({
      TXT: outcome(dns.txt(input.domain), (records) => records.some((chunks) => chunks.join("").trim() === expectedTxt)),
      MX: outcome(dns.mx(input.domain), (records) => records.some((r) => hostEq(r.exchange, input.mxHost))),
      A: outcome(dns.a(input.mxHost), (ips) => ips.includes(input.mailServerIp)),
    })
  })
