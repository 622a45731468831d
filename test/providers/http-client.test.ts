/**
 * The HttpClient port's bounds on real sockets (DECISIONS.md "Hostile input"): one deadline from
 * the call to the last body byte, at most 1 MiB of a body, whatever the provider does. Before,
 * the port handed out the bare fetch: a dripping body or an endless one was read for as long as
 * it lasted, into memory.
 */
import { Effect, Exit } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import {
  boundedFetch,
  HttpClient,
  HttpDeadlineExceeded,
  HttpResponseTooLarge,
  MAX_RESPONSE_BYTES,
  request,
} from "../../effects/ports/HttpClient.ts"
import { type HostileServer, type Misbehaviour, startHostileServer } from "../support/hostile-http.ts"

const servers: Array<HostileServer> = []
afterAll(() => Promise.all(servers.map((s) => s.close())))
const serve = async (b: Misbehaviour) => {
  const s = await startHostileServer(b)
  servers.push(s)
  return s
}

const fetchWithin = (ms: number) => boundedFetch(globalThis.fetch, { deadline: `${ms} millis`, maxResponseBytes: MAX_RESPONSE_BYTES })

const timed = async <A>(f: () => Promise<A>) => {
  const started = performance.now()
  const result = await f().then((value) => ({ value }), (error: unknown) => ({ error }))
  return { ...result, ms: performance.now() - started }
}

describe("boundedFetch (what adapters and libraries get)", () => {
  it("gives up on a server that never answers at the deadline", async () => {
    const s = await serve({ kind: "silent" })
    const r = await timed(() => fetchWithin(400)(s.url))
    expect("error" in r && r.error).toBeInstanceOf(HttpDeadlineExceeded)
    expect(r.ms).toBeGreaterThanOrEqual(350)
    expect(r.ms).toBeLessThan(2_000)
  })

  it("keeps the same deadline running while the body is read (a body dripping a byte at a time)", async () => {
    const s = await serve({ kind: "drip", everyMs: 20 })
    const started = performance.now()
    const res = await fetchWithin(600)(s.url)
    expect(res.status).toBe(200)
    const r = await timed(() => res.text())
    expect("error" in r && r.error).toBeInstanceOf(HttpDeadlineExceeded)
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it("reads at most 1 MiB of an endless body, then cancels it", async () => {
    const s = await serve({ kind: "endless" })
    const res = await fetchWithin(10_000)(s.url)
    const r = await timed(() => res.arrayBuffer())
    expect("error" in r && r.error).toBeInstanceOf(HttpResponseTooLarge)
    // The server stops being read: what it managed to write is socket buffers, not the 10 s of it.
    await new Promise((resolve) => setTimeout(resolve, 200))
    const after = s.written()
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(s.written() - after).toBeLessThan(256 * 1024)
  })

  it("refuses a body announced over the cap without reading it, keeping the status", async () => {
    const s = await serve({ kind: "declared", bytes: 50 * 1024 * 1024 })
    const res = await fetchWithin(10_000)(s.url)
    expect(res.status).toBe(200)
    await expect(res.text()).rejects.toBeInstanceOf(HttpResponseTooLarge)
  })

  it("passes a normal answer through unchanged and honours the caller's own abort", async () => {
    const s = await serve({ kind: "json", status: 201, body: '{"ok":true}' })
    const res = await fetchWithin(5_000)(s.url, { method: "POST", body: "{}" })
    expect([res.status, res.headers.get("content-type"), await res.json()]).toEqual([201, "application/json", { ok: true }])
    const silent = await serve({ kind: "silent" })
    const controller = new AbortController()
    setTimeout(() => controller.abort(new Error("caller gave up")), 100)
    const r = await timed(() => fetchWithin(10_000)(silent.url, { signal: controller.signal }))
    expect("error" in r && String(r.error)).toContain("caller gave up")
    expect(r.ms).toBeLessThan(2_000)
  })

  it("is what the live HttpClient layer hands out", async () => {
    const s = await serve({ kind: "endless" })
    const client = await Effect.runPromise(Effect.provide(Effect.gen(function*() {
      return yield* HttpClient
    }), HttpClient.layer))
    const res = await client.fetch(s.url)
    await expect(res.text()).rejects.toBeInstanceOf(HttpResponseTooLarge)
  })
})

describe("request (one call, one deadline, on the Effect clock)", () => {
  const run = <A, E>(effect: Effect.Effect<A, E, HttpClient>) => Effect.runPromiseExit(Effect.provide(effect, HttpClient.layer))

  it("fails with timeout when nothing arrives", async () => {
    const s = await serve({ kind: "silent" })
    const started = performance.now()
    const exit = await run(request(s.url, {}, "300 millis"))
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain('"reason":"timeout"')
  })

  it("answers the status when the body is still dripping at the deadline (complete: false)", async () => {
    const s = await serve({ kind: "drip", status: 202, everyMs: 20 })
    const started = performance.now()
    const exit = await run(request(s.url, {}, "500 millis"))
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(Exit.isSuccess(exit) && { status: exit.value.status, complete: exit.value.complete }).toEqual({ status: 202, complete: false })
  })

  it("cuts an endless body at 1 MiB (complete: false)", async () => {
    const s = await serve({ kind: "endless" })
    const exit = await run(request(s.url, {}, "10 seconds"))
    expect(Exit.isSuccess(exit)).toBe(true)
    if (!Exit.isSuccess(exit)) return
    expect(exit.value.complete).toBe(false)
    expect(exit.value.text.length).toBeLessThanOrEqual(MAX_RESPONSE_BYTES)
  })

  it("caps the body even behind a test's own unbounded fetch", async () => {
    const s = await serve({ kind: "endless" })
    const exit = await Effect.runPromiseExit(
      Effect.provideService(request(s.url, {}, "10 seconds"), HttpClient, HttpClient.of({ fetch: globalThis.fetch })),
    )
    expect(Exit.isSuccess(exit) && [exit.value.complete, exit.value.text.length <= MAX_RESPONSE_BYTES]).toEqual([false, true])
  })
})
