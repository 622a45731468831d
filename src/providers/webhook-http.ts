/**
 * The live WebhookTransport: node:http/https rather than fetch, because the SSRF guard needs the
 * connection pinned to the address it vetted. The host is resolved once (every address), any
 * non-public address refuses the request unless WEBHOOK_ALLOW_PRIVATE, and the socket then
 * connects to that vetted address, so a DNS answer that changes between check and connect
 * (rebinding) cannot reach an internal host. Redirects are never followed, one deadline covers
 * the whole attempt (the lookup included), and at most 1 KiB of a non-2xx body is read (a huge or
 * endless answer costs nothing).
 */
import { Duration, Effect, Layer } from "effect"
import * as dns from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"
import { AppConfig } from "../../effects/config.ts"
import { classifyIp } from "../../effects/shared/ssrf.ts"
import {
  type WebhookRequest,
  WebhookRequestFailed,
  type WebhookResponse,
  WebhookTargetRefused,
  WebhookTransport,
} from "../../effects/webhooks/transport.ts"

const MAX_BODY_BYTES = 1024

type Vetted = { readonly address: string; readonly family: number }

const systemLookup = (host: string) =>
  Effect.callback<Array<dns.LookupAddress>, WebhookRequestFailed>((resume) => {
    dns.lookup(host, { all: true, verbatim: true }, (err, addresses) => {
      if (err) resume(Effect.fail(new WebhookRequestFailed({ message: `cannot resolve ${host} (${err.code ?? err.message})` })))
      else resume(Effect.succeed(addresses))
    })
  })

/**
 * Every address of `host`. With DNS_SERVERS set, those servers are asked first (A and AAAA), as
 * for every other lookup of the service; names they do not know (`localhost`, /etc/hosts
 * entries) fall back to the system resolver.
 */
const lookupAll = (resolver: dns.promises.Resolver | undefined) => (host: string) =>
  resolver === undefined ? systemLookup(host) : Effect.gen(function*() {
    const [v4, v6] = yield* Effect.promise(() =>
      Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
    )
    const found = [
      ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 })) : []),
      ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 })) : []),
    ]
    return found.length > 0 ? found : yield* systemLookup(host)
  })

/** Resolves the URL's host and checks every address; the first one is where we connect. */
const vet = (url: URL, allowPrivate: boolean, lookup: ReturnType<typeof lookupAll>) =>
  Effect.gen(function*() {
    const host = url.hostname.replace(/^\[|\]$/g, "")
    const literal = classifyIp(host)
    const addresses = literal !== undefined
      ? [{ address: host, family: host.includes(":") ? 6 : 4 }]
      : yield* lookup(host)
    if (addresses.length === 0) return yield* new WebhookRequestFailed({ message: `cannot resolve ${host}` })
    if (!allowPrivate) {
      for (const a of addresses) {
        const cls = classifyIp(a.address)
        if (cls !== "public") {
          return yield* new WebhookTargetRefused({
            message: `refused: ${host} resolves to ${a.address}, a ${cls ?? "invalid"} address; webhook targets must be publicly routable`,
          })
        }
      }
    }
    return addresses[0]! as Vetted
  })

/** Always answers with the vetted address (both callback shapes of `lookup`). */
const pinned = (v: Vetted): LookupFunction => (_host, options, callback) => {
  if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: Array<Vetted>) => void)(null, [v])
  else callback(null, v.address, v.family)
}

const describe = (err: NodeJS.ErrnoException): string => {
  switch (err.code) {
    case "ECONNREFUSED":
      return "connection refused"
    case "ECONNRESET":
      return "connection reset by the receiver"
    case "EPIPE":
      return "connection closed by the receiver"
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "host unreachable"
    default:
      return (err.code ? `${err.code}: ` : "") + String(err.message).slice(0, 160)
  }
}

/**
 * Fails after `ms` of wall-clock time. The transport's timers are real ones (the socket's too):
 * a TestClock driving the retry schedule must not be able to stall a lookup forever.
 */
const wallDeadline = (ms: number, message: string) =>
  Effect.callback<never, WebhookRequestFailed>((resume) => {
    const timer = setTimeout(() => resume(Effect.fail(new WebhookRequestFailed({ message }))), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/** `timeoutMs`: what is left of the attempt's deadline once the host was resolved. */
const request = (req: WebhookRequest, url: URL, target: Vetted, timeoutMs: number) =>
  Effect.callback<WebhookResponse, WebhookRequestFailed>((resume, signal) => {
    const budgetMs = Duration.toMillis(req.timeout)
    let settled = false
    let status: number | undefined
    const chunks: Array<Buffer> = []
    let size = 0
    const settle = (effect: Effect.Effect<WebhookResponse, WebhookRequestFailed>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal.removeEventListener("abort", onAbort)
      outgoing.destroy()
      resume(effect)
    }
    const answered = () => settle(Effect.succeed({ status: status!, body: Buffer.concat(chunks).subarray(0, MAX_BODY_BYTES).toString("utf8") }))
    const failed = (message: string) => settle(Effect.fail(new WebhookRequestFailed({ message })))

    const outgoing = (url.protocol === "https:" ? https : http).request(url, {
      method: "POST",
      headers: { ...req.headers, "content-length": String(Buffer.byteLength(req.body)) },
      agent: false,
      lookup: pinned(target),
    })
    const timer = setTimeout(() => {
      // A status already received is the answer; only its body was slow.
      if (status !== undefined) answered()
      else failed(`no answer within ${budgetMs / 1000} s (timeout)`)
    }, timeoutMs)
    const onAbort = () => settle(Effect.fail(new WebhookRequestFailed({ message: "interrupted" })))
    signal.addEventListener("abort", onAbort)
    if (signal.aborted) onAbort()

    outgoing.on("response", (res) => {
      status = res.statusCode ?? 0
      if (status >= 200 && status < 300) return answered()
      res.on("data", (chunk: Buffer) => {
        chunks.push(chunk)
        size += chunk.length
        if (size >= MAX_BODY_BYTES) answered()
      })
      res.on("end", answered)
      res.on("error", answered)
      res.on("aborted", answered)
    })
    outgoing.on("error", (err: NodeJS.ErrnoException) => {
      if (status !== undefined) answered()
      else failed(describe(err))
    })
    outgoing.end(req.body)
  })

export const webhookHttpLayer = Layer.effect(
  WebhookTransport,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const resolver = config.dnsServers.length > 0 ? new dns.promises.Resolver({ timeout: 2_000, tries: 2 }) : undefined
    resolver?.setServers([...config.dnsServers])
    const lookup = lookupAll(resolver)
    return WebhookTransport.of({
      post: (req) =>
        Effect.gen(function*() {
          const url = yield* Effect.try({
            try: () => new URL(req.url),
            catch: () => new WebhookRequestFailed({ message: "the webhook URL cannot be parsed" }),
          })
          // One deadline for the attempt: the lookup spends from it, the request gets the rest.
          const budgetMs = Duration.toMillis(req.timeout)
          const started = performance.now()
          const target = yield* Effect.raceFirst(
            vet(url, config.webhookAllowPrivate, lookup),
            wallDeadline(budgetMs, `no answer within ${budgetMs / 1000} s (timeout while resolving ${url.hostname})`),
          )
          return yield* request(req, url, target, Math.max(1, budgetMs - (performance.now() - started)))
        }).pipe(Effect.withSpan("WebhookTransport.post")),
    })
  }),
)
