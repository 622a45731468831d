/**
 * Outgoing HTTP for every provider adapter. Adapters never call the global `fetch` directly:
 * msw does not intercept it under Deno, and tests hand in a fetch built on msw handlers.
 */
import { Context, Layer } from "effect"

export interface HttpClientShape {
  readonly fetch: typeof globalThis.fetch
}

export class HttpClient extends Context.Service<HttpClient, HttpClientShape>()("app/HttpClient") {
  /** The live client: the runtime's own fetch. */
  static readonly layer = Layer.succeed(HttpClient, HttpClient.of({ fetch: (input, init) => globalThis.fetch(input, init) }))
}
