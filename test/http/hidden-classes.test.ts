/**
 * What the app builds per request stays a plain, fast-mode object that shares one hidden class
 * across requests. Under load on PostgreSQL, the request context with a getter (`get ip()`, which
 * V8 turns into a dictionary-mode object) had ~5 MB of every scavenge's survivors promoted on
 * /healthz alone; as a value, none (bench/REPORT.md, 2026-11-25). `%HaveSameMap` and
 * `%HasFastProperties` are V8's own answers; the flag that allows them is set for this file only.
 */
import { Effect } from "effect"
import { setFlagsFromString } from "node:v8"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeHttpApp } from "../../src/http/app.ts"
import { ok, type RequestContext, route } from "../../src/http/route.ts"
import { quietLoggerLayer } from "../../src/logger.ts"
import { makeRuntime } from "../../src/runtime.ts"
import { testSettings } from "../support/app.ts"
import { testDatabase } from "../support/db.ts"

setFlagsFromString("--allow-natives-syntax")
const haveSameMap = new Function("a", "b", "return %HaveSameMap(a, b)") as (a: object, b: object) => boolean
const hasFastProperties = new Function("a", "return %HasFastProperties(a)") as (a: object) => boolean

const seen: Array<RequestContext<unknown, unknown, unknown, "none">> = []
const routes = [
  route({
    method: "get",
    path: "/t/seen/:id",
    auth: "none",
    tag: "T",
    summary: "keeps the context it was given",
    handler: (ctx) => Effect.sync(() => (seen.push(ctx), ok({ ip: ctx.ip }))),
  }),
]

let app: ReturnType<typeof makeHttpApp>
let runtime: ReturnType<typeof makeRuntime>
let db: ReturnType<typeof testDatabase>
beforeAll(() => {
  db = testDatabase()
  runtime = makeRuntime(testSettings(), { database: db.layer, logger: quietLoggerLayer, workers: false })
  app = makeHttpApp({ routes, runtime, maxBodyBytes: 1024 })
})
afterAll(async () => {
  await runtime.dispose()
  await db.drop()
})

describe("per-request objects", () => {
  it("the context handed to a route is a fast-mode object with one hidden class for every request", async () => {
    // The probe itself: a literal with a getter is what it catches.
    const withGetter = (n: number) => ({ a: n, get b() { return n } })
    expect(hasFastProperties(withGetter(1))).toBe(false)

    for (const id of [1, 2, 3]) {
      const res = await app.request(`/t/seen/${id}`)
      expect(res.status).toBe(200)
      expect((await res.json()).data.ip).toBe("127.0.0.1")
    }
    expect(seen).toHaveLength(3)
    for (const ctx of seen) expect(hasFastProperties(ctx)).toBe(true)
    expect(haveSameMap(seen[0]!, seen[1]!)).toBe(true)
    expect(haveSameMap(seen[1]!, seen[2]!)).toBe(true)
  })
})
