/**
 * The Hono app: envelope on every answer, request ids, body limit, auth, decoding, and the
 * bridge from each route's Effect handler to HTTP through one ManagedRuntime. Routes stay thin:
 * this file does everything they would otherwise repeat.
 */
import { Effect, Exit, Option, Schema, SchemaIssue } from "effect"
import { Hono } from "hono"
import { bodyLimit } from "hono/body-limit"
import { methodNotAllowed } from "hono/method-not-allowed"
import type { Context as HonoContext } from "hono"
import { Authenticator, type Principal } from "../../effects/auth/service.ts"
import { type FieldIssue, PayloadTooLarge, ValidationError } from "../../effects/errors.ts"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { envelope } from "./envelope.ts"
import { renderCause, renderError } from "./errors.ts"
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

const decode = <T>(schema: Schema.Codec<T, unknown> | undefined, input: unknown) =>
  schema
    ? Effect.mapError(
      Schema.decodeUnknownEffect(schema)(input, { errors: "all", onExcessProperty: "ignore" }),
      (e) => issuesOf(e.issue),
    )
    : Effect.succeed(input as T)

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

export interface AppOptions {
  readonly routes: ReadonlyArray<Route>
  /** Provides every service the routes use (src/layers.ts). */
  readonly runtime: AppRuntime
  readonly maxBodyBytes: number
}

export const makeHttpApp = (options: AppOptions): Hono<Vars> => {
  const { runtime } = options
  const app = new Hono<Vars>({ strict: false })

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
    const requestId = given && REQUEST_ID.test(given) ? given : `req_${randomHexSync(12)}`
    c.set("requestId", requestId)
    c.header("X-Request-Id", requestId)
    const started = performance.now()
    await next()
    const ms = Math.round((performance.now() - started) * 10) / 10
    runtime.runFork(
      Effect.logInfo("http").pipe(
        Effect.annotateLogs({ request_id: requestId, method: c.req.method, path: c.req.path, status: c.res.status, ms }),
      ),
    )
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

  app.use(
    "*",
    bodyLimit({
      maxSize: options.maxBodyBytes,
      onError: (c) =>
        sendError(c as HonoContext<Vars>, renderError(new PayloadTooLarge({ message: `request body exceeds ${options.maxBodyBytes} bytes` }))),
    }),
  )

  for (const r of options.routes) {
    app.on(r.method.toUpperCase(), r.path, async (c) => {
      const requestId = c.get("requestId")
      const rawBody = r.body || r.rawBody ? await c.req.text() : ""
      const program = Effect.gen(function*() {
        let principal: Principal | undefined
        if (r.auth !== "none") {
          const auth = yield* Authenticator
          principal = yield* auth.authenticate(
            { authorization: c.req.header("authorization"), apiKey: c.req.header("x-api-key") },
            r.auth,
          )
          if (r.scope) yield* auth.requireScope(principal, r.scope)
        }
        // Credentials first: a caller without them learns nothing about what a body must look like.
        const parsed = r.body ? yield* parseJsonBody(rawBody, c.req.header("content-type")) : {}
        const results = yield* Effect.all(
          [
            Effect.result(decode(r.params, c.req.param())),
            Effect.result(decode(r.query, c.req.query())),
            Effect.result(decode(r.body, parsed)),
          ] as const,
        )
        const issues = results.flatMap((x) => (x._tag === "Failure" ? x.failure : []))
        if (issues.length > 0) {
          return yield* new ValidationError({ message: "request validation failed", issues })
        }
        const [params, query, body] = results.map((x) => (x._tag === "Success" ? x.success : undefined))
        return yield* r.handler({
          body,
          query,
          params,
          principal,
          requestId,
          ip: clientIp(c),
          header: (name) => c.req.header(name),
          rawBody,
        })
      }).pipe(Effect.annotateLogs({ request_id: requestId }), Effect.withSpan(`${r.method.toUpperCase()} ${r.path}`))

      const exit = await runtime.runPromiseExit(program)
      if (Exit.isFailure(exit)) return sendError(c, renderCause(exit.cause))
      const reply = exit.value
      if (reply.raw) {
        for (const [k, v] of Object.entries(reply.headers ?? {})) c.header(k, v)
        c.header("Content-Type", reply.raw.contentType)
        return c.body(reply.raw.body as string, (reply.status ?? r.status ?? 200) as 200)
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
