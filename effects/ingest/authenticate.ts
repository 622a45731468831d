/**
 * SPF, DKIM, DMARC and ARC verdicts for a received message (mailauth), with every DNS question
 * going through the Dns port. Authentication never blocks delivery: a failure or a slow resolver
 * ends in a `temperror` record, and the message is stored anyway (filtering is the customer's
 * call; the verdicts are there to make it).
 */
import { Effect } from "effect"
import { authenticate } from "mailauth"
import { mailauthResolver } from "../shared/dns-resolver.ts"
import type { MessageBytes } from "./bytes.ts"
import { pgSafe } from "./text.ts"
import { plainIp, traceSafe } from "./trace.ts"

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

const AUTH_TIMEOUT = "20 seconds"

/**
 * Verdicts and the trace headers to prepend. Everything returned is safe to store: names taken
 * from the message (a DKIM `d=exa\0mple.com`) lose their NUL and control characters, so a
 * hostile signature can never make the storing transaction fail (a 4xx the sender would retry
 * for days).
 */
export const authenticateMessage = (message: MessageBytes, input: AuthInput) =>
  Effect.gen(function*() {
    const resolver = yield* mailauthResolver()
    const result = yield* Effect.tryPromise(() =>
      authenticate(message.stream(), {
        ip: plainIp(input.ip),
        helo: input.helo,
        sender: input.sender,
        mta: input.mta,
        resolver,
        disableBimi: true,
      })
    ).pipe(Effect.timeout(AUTH_TIMEOUT), Effect.result)
    if (result._tag === "Failure") {
      yield* Effect.logWarning("mail authentication failed", result.failure)
      return {
        results: { spf: "temperror", dkim: [], dmarc: "temperror", arc: "temperror", header: "" } satisfies AuthResults,
        headers: "",
      }
    }
    const r = result.success
    const headers = traceSafe(r.headers)
    const header = /^Authentication-Results:[\s\S]*?(?=\r?\n\S|$)/im.exec(headers)?.[0] ?? ""
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
      } satisfies AuthResults,
      // Written on top of the stored message, as an MX does.
      headers,
    }
  }).pipe(Effect.withSpan("Ingest.authenticate"))
