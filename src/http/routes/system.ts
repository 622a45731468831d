/** Health, readiness and the API's own documentation. */
import { Effect } from "effect"
import { Database } from "../../../effects/ports/Database.ts"
import { ok, route } from "../route.ts"

export const healthRoutes = [
  route({
    method: "get",
    path: "/healthz",
    auth: "none",
    tag: "System",
    summary: "The process is up",
    handler: () => Effect.succeed(ok({ status: "ok" })),
  }),
  route({
    method: "get",
    path: "/readyz",
    auth: "none",
    tag: "System",
    summary: "The database answers",
    handler: () =>
      Effect.gen(function*() {
        const db = yield* Database
        yield* db.query("SELECT 1")
        return ok({ status: "ready", database: db.dialect })
      }),
  }),
]
