/**
 * A route is declared once: method, path, auth, scope, request and response schemas, handler.
 * The same declaration drives request decoding (src/http/app.ts) and the OpenAPI document
 * (src/http/openapi.ts), so the documentation cannot drift from what the server enforces.
 */
import { Effect, type Schema } from "effect"
import type { Principal } from "../../effects/auth/service.ts"
import type { Scope } from "../../effects/auth/scopes.ts"
import { type Pagination, pagination, paging } from "../../effects/shared/schema.ts"
import type { AppServices } from "../layers.ts"

export type Method = "get" | "post" | "put" | "patch" | "delete"

/** `none`: public; `jwt`: user access token only; `key`: API key or access token. */
export type Auth = "none" | "jwt" | "key"

export interface RequestContext<B, Q, P, A extends Auth> {
  readonly body: B
  readonly query: Q
  readonly params: P
  /** The caller; present on every route whose auth is not `none`. */
  readonly principal: A extends "none" ? undefined : Principal
  readonly requestId: string
  /** Client address: the socket peer (X-Forwarded-For is not trusted; there is no proxy setting yet). */
  readonly ip: string
  readonly header: (name: string) => string | undefined
  /** The body as received, for routes that verify a signature over it (`rawBody: true`). */
  readonly rawBody: string
}

/** What a handler answers; the app wraps it in the envelope. */
export interface Reply {
  readonly data?: unknown
  readonly message?: string
  readonly pagination?: Pagination | null
  /** Success status; defaults to the route's `status`, else 200. */
  readonly status?: number
  readonly headers?: Record<string, string>
  /**
   * Further items of `data` (an array), one group at a time: each is run only once the client has
   * taken what came before, so a page of large messages is never held whole
   * (effects/shared/heavy-pages.ts). A group that fails after the answer began cuts it off.
   */
  readonly more?: ReadonlyArray<Effect.Effect<ReadonlyArray<unknown>, unknown, AppServices>>
  /** Non-JSON answers (an HTML page, raw MIME); bypasses the envelope. */
  readonly raw?: { readonly body: string | Uint8Array; readonly contentType: string }
}

export interface RouteSpec<B, Q, P, A extends Auth> {
  readonly method: Method
  /** Hono path syntax: `/api/inbound/messages/:id`. */
  readonly path: string
  readonly auth: A
  /** Scope an API key needs (JWTs act with `full`). */
  readonly scope?: Scope
  readonly summary: string
  readonly tag: string
  readonly description?: string
  readonly body?: Schema.Codec<B, unknown>
  readonly query?: Schema.Codec<Q, unknown>
  readonly params?: Schema.Codec<P, unknown>
  /** Schema of `data` in a successful answer (documentation only). */
  readonly response?: Schema.Codec<unknown, unknown>
  /** Success status, e.g. 201 for creations. */
  readonly status?: number
  readonly rawBody?: boolean
  /** Hide from the OpenAPI document (the fake gateway's pages). */
  readonly internal?: boolean
  /**
   * Runs on the app's runtime, so it may use any service the layers provide (AppServices); one
   * they do not provide is a compile error. Failures are rendered by src/http/errors.ts.
   */
  readonly handler: (ctx: RequestContext<B, Q, P, A>) => Effect.Effect<Reply, unknown, AppServices>
}

/** A declared route as the app and the OpenAPI document see it: its request types erased. */
export interface Route extends Omit<RouteSpec<unknown, unknown, unknown, Auth>, "handler"> {
  // Method syntax on purpose: its parameter is compared bivariantly, which is what lets a
  // RouteSpec<B, Q, P, A> stand here. Sound because app.ts decodes body, query and params with
  // this route's own schemas (and authenticates per `auth`) before calling it.
  handler(ctx: RequestContext<unknown, unknown, unknown, Auth>): Effect.Effect<Reply, unknown, AppServices>
}

/** Declares a route; the generics are inferred from the schemas. */
export const route = <B = unknown, Q = unknown, P = unknown, A extends Auth = Auth>(spec: RouteSpec<B, Q, P, A>): Route => spec

/** A successful reply. */
export const ok = (data?: unknown, extra: Omit<Reply, "data"> = {}): Reply => ({ data, ...extra })

/**
 * A stored message as a download (`message/rfc822`, `<name>.eml`). Mail is untrusted content: the
 * attachment disposition and `nosniff` keep a browser from rendering it as HTML.
 */
export const emlDownload = (body: Uint8Array | string, name: string): Reply =>
  ok(undefined, {
    raw: { body, contentType: "message/rfc822" },
    headers: { "Content-Disposition": `attachment; filename="${name}.eml"`, "X-Content-Type-Options": "nosniff" },
  })

/** A service's answer as the reply's data. */
export const okFrom = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<Reply, E, R> => Effect.map(effect, (data) => ok(data))

/**
 * A listing: `list` reads one page (limit and offset from `?page` and `?per_page`); the reply
 * carries the rows, each through `toJson`, any further rows it fetches as the answer is written
 * (`more`: effects/shared/heavy-pages.ts), and the page's pagination.
 */
export const paged = <Row, E, R>(
  query: { readonly page?: number | undefined; readonly per_page?: number | undefined },
  list: (page: { readonly limit: number; readonly offset: number }) => Effect.Effect<
    {
      readonly rows: ReadonlyArray<Row>
      readonly more?: ReadonlyArray<Effect.Effect<ReadonlyArray<Row>, unknown, never>>
      readonly total: number
    },
    E,
    R
  >,
  toJson: (row: Row) => unknown = (row) => row,
): Effect.Effect<Reply, E, R> => {
  const { page, perPage, offset } = paging(query)
  return Effect.map(list({ limit: perPage, offset }), ({ rows, more, total }) =>
    ok(rows.map(toJson), {
      pagination: pagination(page, perPage, total),
      ...(more && more.length > 0 ? { more: more.map((group) => Effect.map(group, (rs) => rs.map(toJson))) } : {}),
    }))
}
