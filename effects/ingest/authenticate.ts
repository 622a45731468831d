/**
 * SPF, DKIM, DMARC and ARC verdicts for a received message (mailauth), with every DNS question
 * going through the resolver it is given (the Dns port and its TTL cache). Authentication never
 * blocks delivery: a failure or a slow resolver ends in `temperror` verdicts, and the message is
 * stored anyway (filtering is the customer's call; the verdicts are there to make it).
 *
 * Plain async code (no Effect): it runs in the prepare workers (./prepare.ts).
 */
import type { Readable } from "node:stream"
import { authenticate as mailauth, type DNSResolver } from "mailauth"
import { headerLinesOf } from "./mime.ts"
import { pgSafe } from "./text.ts"
import { plainIp, traceSafe } from "./trace.ts"
import { type KeptResolver, type VerdictMemo, verdictKey } from "./verdicts.ts"

/** The verdicts as stored (`auth_results`): every string `pgSafe`, so the row takes them as they are. */
export interface AuthResults {
  readonly spf: string
  readonly dkim: ReadonlyArray<{ readonly domain: string; readonly selector: string; readonly result: string }>
  readonly dmarc: string
  readonly arc: string
  /** The Authentication-Results header as written into the stored message. */
  readonly header: string
}

export interface AuthInput {
  readonly ip: string
  readonly helo: string
  /** MAIL FROM ('' for bounces). */
  readonly sender: string
  /** This MX's host name (the authserv-id). */
  readonly mta: string
}

export interface Authenticated {
  readonly results: AuthResults
  /** The trace headers to write on top of the stored message, as an MX does. */
  readonly headers: string
  /** Why authentication gave up (then every verdict is `temperror` and `headers` is empty). */
  readonly failure?: string
}

/** Longest the verdicts may take (a resolver that never answers must not hold the message). */
export const AUTH_TIMEOUT_MS = 20_000

const TEMPERROR: AuthResults = { spf: "temperror", dkim: [], dmarc: "temperror", arc: "temperror", header: "" }

const within = <A>(ms: number, work: Promise<A>): Promise<A> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)))
  return Promise.race([work, late]).finally(() => clearTimeout(timer))
}

/** Header fields whose check reads the body: DKIM signatures, and ARC sets (their message signature). */
const SIGNED = /^(?:dkim-signature|arc-[a-z-]+)[ \t]*:/im

/**
 * The header block (with the empty line ending it) when the message carries no DKIM or ARC
 * signature: then no verdict depends on the body (SPF reads the envelope, DMARC the From header
 * and the other verdicts), and hashing a body no signature covers cost mailauth ~0.6 ms per
 * 100 KiB. Undefined when the message is signed or has no body.
 */
export const unsignedHeaders = (message: Buffer): Buffer | undefined => {
  const crlf = message.indexOf("\r\n\r\n")
  // A bare-LF blank line counts only before the CRLF one (never a scan of a whole CRLF body).
  const lf = (crlf >= 0 ? message.subarray(0, crlf + 2) : message).indexOf("\n\n")
  const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1
  if (end < 0) return undefined
  const head = message.subarray(0, end)
  return SIGNED.test(head.toString("latin1")) ? undefined : head
}

/**
 * Verdicts and the trace headers to prepend, from `memo` when the message is unsigned and the
 * same question was answered while its DNS answers may still be kept (./verdicts.ts).
 * Everything returned is safe to store: names taken from the message (a DKIM `d=exa\0mple.com`)
 * lose their NUL and control characters, so a hostile signature can never make the storing
 * transaction fail (a 4xx the sender would retry for days).
 */
export const authenticate = async (
  message: Buffer | Readable,
  input: AuthInput,
  resolver: KeptResolver,
  memo?: VerdictMemo<Authenticated>,
): Promise<Authenticated> => {
  const head = Buffer.isBuffer(message) ? unsignedHeaders(message) : undefined
  const key = memo && head ? verdictKey(head, input) : undefined
  if (key === undefined) return verdicts(head ?? message, input, resolver)
  return memo!.get(key) ?? memo!.compute(key, resolver, (r) => verdicts(head!, input, r), settled)
}

/** Verdicts worth keeping: none of them a temporary error (a DNS outage on the way) or a timeout. */
const settled = (a: Authenticated): boolean =>
  a.failure === undefined && a.results.spf !== "temperror" && a.results.dmarc !== "temperror" && a.results.arc !== "temperror"

/** mailauth's verdicts and trace headers for `message` (a whole message, or an unsigned header block). */
const verdicts = async (message: Buffer | Readable, input: AuthInput, resolver: DNSResolver): Promise<Authenticated> => {
  let r: Awaited<ReturnType<typeof mailauth>>
  try {
    r = await within(
      AUTH_TIMEOUT_MS,
      mailauth(message, {
        ip: plainIp(input.ip),
        helo: input.helo,
        sender: input.sender,
        mta: input.mta,
        resolver,
        disableBimi: true,
      }),
    )
  } catch (e) {
    if (typeof (message as Readable).destroy === "function") (message as Readable).destroy()
    return { results: TEMPERROR, headers: "", failure: e instanceof Error ? e.message : String(e) }
  }
  const headers = traceSafe(r.headers)
  // The whole header, continuation lines included (mailauth folds it after the authserv-id).
  const header = headerLinesOf(headers).find((h) => h.key === "authentication-results")?.line ?? ""
  const text = (s: string | undefined) => pgSafe(traceSafe(s ?? ""))
  return {
    results: {
      spf: text(r.spf ? r.spf.status.result : "none"),
      // mailauth reports an unsigned message as one "none" entry without a domain: no signatures.
      dkim: (r.dkim?.results ?? []).filter((d) => d.signingDomain).map((d) => ({
        domain: text(d.signingDomain),
        selector: text(d.selector),
        result: text(d.status?.result ?? "none"),
      })),
      dmarc: text(r.dmarc ? r.dmarc.status.result : "none"),
      arc: text(r.arc ? r.arc.status.result : "none"),
      header: text(header.replace(/\r?\n[ \t]+/g, " ").replace(/^Authentication-Results:\s*/i, "")),
    },
    headers,
  }
}
