/**
 * A route is declared once: method, path, auth, scope, request and response schemas, handler.
 * The same declaration drives request decoding (src/http/app.ts) and the OpenAPI document
 * (src/http/openapi.ts), so the documentation cannot drift from what the server enforces.
 */
import type { Effect, Schema } from "effect"
import type { Principal } from "../../effects/auth/service.ts"
import type { Scope } from "../../effects/auth/scopes.ts"
import type { Pagination } from "../../effects/shared/schema.ts"

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
  /** Non-JSON answers (an HTML page, raw MIME); bypasses the envelope. */
  readonly raw?: { readonly body: string | Uint8Array; readonly contentType: string }
}

type AnySchema = Schema.Codec<any, any, never, never>

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
  readonly body?: Schema.Codec<B, any, never, never>
  readonly query?: Schema.Codec<Q, any, never, never>
  readonly params?: Schema.Codec<P, any, never, never>
  /** Schema of `data` in a successful answer (documentation only). */
  readonly response?: AnySchema
  /** Success status, e.g. 201 for creations. */
  readonly status?: number
  readonly rawBody?: boolean
  /** Hide from the OpenAPI document (the fake gateway's pages). */
  readonly internal?: boolean
  // Handlers may need any service of the app; the runtime provides them all (src/layers.ts).
  readonly handler: (ctx: RequestContext<B, Q, P, A>) => Effect.Effect<Reply, unknown, any>
}

export type Route = RouteSpec<any, any, any, Auth>

/** Declares a route; the generics are inferred from the schemas. */
export const route = <B = unknown, Q = unknown, P = unknown, A extends Auth = Auth>(spec: RouteSpec<B, Q, P, A>): Route =>
  spec as Route

/** A successful reply. */
export const ok = (data?: unknown, extra: Omit<Reply, "data"> = {}): Reply => ({ data, ...extra })
