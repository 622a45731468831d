/**
 * The Hono app: envelope on every answer, request ids, body limit, auth, decoding, and the
 * bridge from each route's Effect handler to HTTP through one ManagedRuntime. Routes stay thin:
 * this file does everything they would otherwise repeat.
 */
import { Effect, Exit, Option, References, Schema, SchemaIssue } from "effect"
import { Hono } from "hono"
import { methodNotAllowed } from "hono/method-not-allowed"
import type { Context as HonoContext } from "hono"
import { randomFillSync } from "node:crypto"
import { Authenticator, type Principal } from "../../effects/auth/service.ts"
import { type FieldIssue, PayloadTooLarge, ValidationError } from "../../effects/errors.ts"
import { AccessLog } from "../logger.ts"
import { type BodyBudget, bodyBudget, readBody, tooLarge } from "./body.ts"
import { envelope } from "./envelope.ts"
import { renderCause, renderError } from "./errors.ts"
import { streamedEnvelope } from "./streamed.ts"
import type { AppRuntime } from "../layers.ts"
import type { Route } from "./route.ts"

type Vars = { Variables: { requestId: string } }

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** Turns a schema failure into one `errors[]` entry per bad field, with dotted paths. */
export const issuesOf = (issue: SchemaIssue.Issue, prefix: ReadonlyArray<PropertyKey> = []): Array<FieldIssue> =>
  formatter(issue).issues.map((i) => {
    const path = [...prefix, ...(i.path ?? []).map((p) => (typeof p === "object" && p !== null && "key" in p ? p.key : p))]
    return {
      ...(path.length ? { field: path.map(String).join(".") } : {}),
      code: "VALIDATION_ERROR",
      message: i.message === "Missing key" ? "is required" : i.message,
    }
  })

/** A decoder built once per route schema; `undefined` input schemas pass the input through. */
const decoder = <T>(schema: Schema.Codec<T, unknown, never, never> | undefined) => {
  if (!schema) return undefined
  const decode = Schema.decodeUnknownEffect(schema)
  return (input: unknown) =>
    Effect.result(Effect.mapError(decode(input, { errors: "all", onExcessProperty: "ignore" }), (e) => issuesOf(e.issue)))
}

/** Request ids from a pool of random bytes (one CSPRNG call per ~340 requests, not per request). */
const requestIds = () => {
  const pool = Buffer.alloc(4092)
  let at = pool.length
  return () => {
    if (at + 12 > pool.length) {
      randomFillSync(pool)
      at = 0
    }
    at += 12
    return `req_${pool.toString("hex", at - 12, at)}`
  }
}

const allowedContentType = (ct: string | undefined) => ct === undefined || /^application\/([a-z.+-]*\+)?json\b/i.test(ct)

/**
 * An empty body is `{}` (every field then reports missing). Every body is JSON (SPEC.md), so a
 * body that parses is taken whatever its Content-Type (`curl -d` sends form-urlencoded); one that
 * does not is refused, naming the Content-Type when that was not JSON either.
 */
const parseJsonBody = (rawBody: string, contentType: string | undefined): Effect.Effect<unknown, ValidationError> => {
  if (rawBody.trim() === "") return Effect.succeed({})
  return Effect.try({
    try: () => JSON.parse(rawBody) as unknown,
    catch: () =>
      ValidationError.field("body", allowedContentType(contentType) ? "malformed JSON" : "expected a JSON body (Content-Type: application/json)"),
  })
}

type Decoder = NonNullable<ReturnType<typeof decoder>>

/** A route with its decoders, built once when the app is made. */
interface CompiledRoute {
  readonly route: Route
  readonly params: Decoder | undefined
  readonly query: Decoder | undefined
  readonly body: Decoder | undefined
}

/** Decodes one input; a failure adds its field issues to `issues` and yields `undefined`. */
const take = (decode: Decoder | undefined, input: unknown, issues: Array<FieldIssue>): Effect.Effect<unknown> =>
  decode === undefined ? Effect.succeed(input) : Effect.map(decode(input), (result) => {
    if (result._tag === "Success") return result.success
    issues.push(...result.failure)
    return undefined
  })

/**
 * One request: credentials, then the body and every input decoded, then the route's handler.
 * Defined once at module level, never as `Effect.gen(function*() {…})` inside the request: a
 * generator function created per request that reaches the request measured ~6 MB of every
 * scavenge's survivors promoted under load and 42k against 70k req/s in a bare Hono app
 * (bench/REPORT.md, 2026-11-25 afternoon).
 */
const handle = Effect.fnUntraced(function*(compiled: CompiledRoute, c: HonoContext<Vars>, requestId: string, bodies: Bodies) {
  const r = compiled.route
  let principal: Principal | undefined
  if (r.auth !== "none") {
    const auth = yield* Authenticator
    principal = yield* auth.authenticate({ authorization: c.req.header("authorization"), apiKey: c.req.header("x-api-key") }, r.auth)
    if (r.scope) yield* auth.requireScope(principal, r.scope)
  }
  // Credentials first: a caller without them has no body read (./body.ts) and learns nothing
  // about what it must look like. A body is held within the process's budget until the answer.
  if (!r.body && !r.rawBody) return yield* answer(compiled, c, requestId, principal, "")
  return yield* bodies.budget.holding(
    c.req.raw.headers,
    Effect.flatMap(readBody(c.req.raw, bodies.max), (rawBody) => answer(compiled, c, requestId, principal, rawBody)),
  )
})

/** What `handle` needs to read bodies: MAX_BODY_BYTES and the process's budget for them. */
interface Bodies {
  readonly max: number
  readonly budget: BodyBudget
}

/** The request decoded and handed to its route (module level, as `handle`). */
const answer = Effect.fnUntraced(function*(
  compiled: CompiledRoute,
  c: HonoContext<Vars>,
  requestId: string,
  principal: Principal | undefined,
  rawBody: string,
) {
  const r = compiled.route
  const parsed = r.body ? yield* parseJsonBody(rawBody, c.req.header("content-type")) : {}
  const issues: Array<FieldIssue> = []
  const params = yield* take(compiled.params, c.req.param(), issues)
  const query = yield* take(compiled.query, c.req.query(), issues)
  const body = yield* take(compiled.body, parsed, issues)
  if (issues.length > 0) return yield* new ValidationError({ message: "request validation failed", issues })
  return yield* r.handler({
    body,
    query,
    params,
    principal,
    requestId,
    // A value, not a getter: a getter makes V8 build this object in dictionary mode, and with it
    // ~5 MB of every scavenge's survivors were promoted under load (test/http/hidden-classes.test.ts).
    ip: clientIp(c),
    header: (name) => c.req.header(name),
    rawBody,
  })
})

export interface AppOptions {
  readonly routes: ReadonlyArray<Route>
  /** Provides every service the routes use (src/layers.ts). */
  readonly runtime: AppRuntime
  readonly maxBodyBytes: number
}

/** What the app reads from the runtime once, at its first request (the runtime may still be building when the app is made). */
interface Ambient {
  readonly accessLog: AccessLog["Service"]["write"] | "effect"
  readonly tracing: boolean
}

export const makeHttpApp = (options: AppOptions): Hono<Vars> => {
  const { runtime } = options
  const app = new Hono<Vars>({ strict: false })
  const nextRequestId = requestIds()
  const bodies: Bodies = { max: options.maxBodyBytes, budget: bodyBudget(options.maxBodyBytes) }
  let ambient: Ambient | undefined
  let ambientLoading: Promise<Ambient> | undefined
  const loadAmbient = () =>
    (ambientLoading ??= runtime.runPromise(Effect.gen(function*() {
      const access = yield* Effect.serviceOption(AccessLog)
      const tracing = yield* References.TracerEnabled
      return { accessLog: Option.isSome(access) ? access.value.write : "effect" as const, tracing }
    })).then((a) => (ambient = a)))

  const send = (c: HonoContext<Vars>, status: number, body: Omit<Parameters<typeof envelope>[1], never>, headers: Record<string, string> = {}) => {
    for (const [k, v] of Object.entries(headers)) c.header(k, v)
    return c.json(envelope(c.get("requestId"), body), status as 200)
  }

  const sendError = (c: HonoContext<Vars>, rendered: ReturnType<typeof renderError>) => {
    if (rendered.internal !== undefined) {
      runtime.runFork(
        Effect.logError("request failed", rendered.internal).pipe(Effect.annotateLogs({ request_id: c.get("requestId") })),
      )
    }
    return send(
      c,
      rendered.status,
      {
        success: false,
        message: rendered.message,
        errors: rendered.errors,
        ...(rendered.data !== undefined ? { data: rendered.data } : {}),
      },
      rendered.headers,
    )
  }

  app.use("*", async (c, next) => {
    const given = c.req.header("x-request-id")
    const requestId = given && REQUEST_ID.test(given) ? given : nextRequestId()
    c.set("requestId", requestId)
    c.header("X-Request-Id", requestId)
    const started = performance.now()
    const { accessLog } = ambient ?? (await loadAmbient())
    await next()
    // One line per request, written to the log buffer directly (no fiber, no Effect logger).
    if (accessLog === undefined) return
    const entry = { request_id: requestId, method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round((performance.now() - started) * 10) / 10 }
    if (accessLog !== "effect") return accessLog(entry)
    runtime.runFork(Effect.logInfo("http").pipe(Effect.annotateLogs(entry)))
  })

  app.use(
    "*",
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, methods) =>
        send(
          c as HonoContext<Vars>,
          405,
          { success: false, message: "method not allowed", errors: [{ code: "METHOD_NOT_ALLOWED", message: `allowed: ${methods.join(", ")}` }] },
          { Allow: methods.join(", ") },
        ),
    }),
  )

  // A body declared longer than MAX_BODY_BYTES is refused from its headers; one of unknown
  // length is counted while the route reads it (./body.ts).
  app.use("*", (c, next): Promise<void | Response> =>
    tooLarge(c.req.raw.headers, options.maxBodyBytes)
      ? Promise.resolve(sendError(c as HonoContext<Vars>, renderError(new PayloadTooLarge({ message: `request body exceeds ${options.maxBodyBytes} bytes` }))))
      : next())

  for (const r of options.routes) {
    const compiled: CompiledRoute = { route: r, params: decoder(r.params), query: decoder(r.query), body: decoder(r.body) }
    const span = `${r.method.toUpperCase()} ${r.path}`
    app.on(r.method.toUpperCase(), r.path, async (c) => {
      const requestId = c.get("requestId")
      const annotated = Effect.annotateLogs(handle(compiled, c, requestId, bodies), "request_id", requestId)
      const exit = await runtime.runPromiseExit(ambient?.tracing ? Effect.withSpan(annotated, span) : annotated)
      if (Exit.isFailure(exit)) return sendError(c, renderCause(exit.cause))
      const reply = exit.value
      if (reply.raw) {
        for (const [k, v] of Object.entries(reply.headers ?? {})) c.header(k, v)
        c.header("Content-Type", reply.raw.contentType)
        return c.body(reply.raw.body as string, (reply.status ?? r.status ?? 200) as 200)
      }
      if (reply.more && reply.more.length > 0) {
        for (const [k, v] of Object.entries(reply.headers ?? {})) c.header(k, v)
        const page = { ...reply, data: reply.data as ReadonlyArray<unknown>, more: reply.more }
        return c.body(streamedEnvelope(runtime, requestId, page), (reply.status ?? r.status ?? 200) as 200, { "Content-Type": "application/json" })
      }
      return send(
        c,
        reply.status ?? r.status ?? 200,
        {
          success: true,
          ...(reply.message !== undefined ? { message: reply.message } : {}),
          ...(reply.data !== undefined ? { data: reply.data } : {}),
          ...(reply.pagination !== undefined ? { pagination: reply.pagination } : {}),
        },
        reply.headers,
      )
    })
  }

  app.notFound((c) =>
    send(c as HonoContext<Vars>, 404, {
      success: false,
      message: "not found",
      errors: [{ code: "NOT_FOUND", message: `no route for ${c.req.method} ${c.req.path}` }],
    })
  )
  app.onError((err, c) => sendError(c as HonoContext<Vars>, { ...renderError(err), internal: err }))
  return app
}

const clientIp = (c: HonoContext): string => {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined
  return Option.getOrElse(Option.fromNullishOr(env?.incoming?.socket?.remoteAddress), () => "127.0.0.1")
}
