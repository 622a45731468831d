/**
 * Type-level checks of the route declaration (`npx tsc --noEmit -p .` runs them; a
 * `@ts-expect-error` that no longer errors fails tsc): a handler may use only services the
 * runtime's layers provide (AppServices), and its request is typed by the route's schemas.
 */
import { Context, Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { Templates } from "../../effects/templates/service.ts"
import { ok, route } from "../../src/http/route.ts"

class NotInTheLayers extends Context.Service<NotInTheLayers, { readonly value: number }>()("test/NotInTheLayers") {}

describe("route handler types", () => {
  it("accepts a handler using a service of the layers, refuses one the layers lack", () => {
    const fine = route({
      method: "get",
      path: "/t/fine",
      auth: "key",
      summary: "",
      tag: "Test",
      handler: ({ principal }) => Effect.map(Templates.use((t) => t.list(principal.userId)), (data) => ok(data)),
    })
    const refused = route({
      method: "get",
      path: "/t/refused",
      auth: "none",
      summary: "",
      tag: "Test",
      handler: () =>
        // @ts-expect-error NotInTheLayers is not in AppServices: a compile error, not a 500 at run time.
        Effect.gen(function*() {
          const s = yield* NotInTheLayers
          return ok(s.value)
        }),
    })
    expect([fine.path, refused.path]).toEqual(["/t/fine", "/t/refused"])
  })

  it("types the decoded body from the route's schema", () => {
    const typed = route({
      method: "post",
      path: "/t/typed",
      auth: "none",
      summary: "",
      tag: "Test",
      body: Schema.Struct({ n: Schema.Number }),
      // @ts-expect-error `m` is not a field of the body schema.
      handler: ({ body }) => Effect.succeed(ok(body.n + body.m)),
    })
    expect(typed.method).toBe("post")
  })
})
