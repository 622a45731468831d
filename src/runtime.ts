/**
 * Builds the running service from settings: one ManagedRuntime holding every service and
 * worker, the Hono app, and the socket listeners (HTTP; the SMTP servers join via `listeners`).
 * `main.ts` and the test app both start through here, so tests exercise the real wiring.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { serve } from "@hono/node-server"
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import { AppConfig, type Settings } from "../effects/config.ts"
import type { Database, DbError } from "../effects/ports/Database.ts"
import { HttpClient } from "../effects/ports/HttpClient.ts"
import { databaseLayer } from "./db/layer.ts"
import { makeHttpApp } from "./http/app.ts"
import { answerClientErrors, closeWhenBodyUnread } from "./http/client-errors.ts"
import { routesFor } from "./http/routes/index.ts"
import { type AppRuntime, servicesLayer, workersLayer } from "./layers.ts"
import { loggerLayer } from "./logger.ts"
import { listeners } from "./listeners.ts"
import { platformProvidersLayer } from "./providers/platform.ts"
import { providerReport } from "./providers/report.ts"

export interface Overrides {
  /** Replaces the database chosen from settings (tests: a fresh PGlite or a schema on PostgreSQL). */
  readonly database?: Layer.Layer<Database, DbError, AppConfig>
  /**
   * Replaces or adds infrastructure services (HttpClient with msw's fetch, provider fakes, a
   * TestClock). What it provides stays unnamed: it may only replace services the runtime has.
   */
  readonly infrastructure?: Layer.Layer<never>
  readonly logger?: Layer.Layer<never>
  /** Start the long-lived workers (tests that drive workers by hand leave them off). */
  readonly workers?: boolean
}

export const makeRuntime = (settings: Settings, overrides: Overrides = {}) => {
  const config = Layer.succeed(AppConfig, AppConfig.of(settings))
  const base = Layer.mergeAll(config, HttpClient.layer, overrides.logger ?? loggerLayer(settings.logLevel))
  const external = overrides.infrastructure ? [overrides.infrastructure] : []
  const infra = Layer.mergeAll(
    (overrides.database ?? databaseLayer).pipe(Layer.provide(base)),
    // Platform mail and SMS chosen from settings; later entries win, so a test's adapters replace them.
    platformProvidersLayer.pipe(Layer.provide(Layer.mergeAll(base, ...external))),
    ...external,
  ).pipe(Layer.provideMerge(base))
  const app = Layer.mergeAll(servicesLayer, overrides.workers === false ? Layer.empty : workersLayer).pipe(
    Layer.provideMerge(servicesLayer),
    Layer.provideMerge(infra),
  )
  const runtime: AppRuntime = ManagedRuntime.make(app)
  return runtime
}

export interface Running {
  readonly runtime: AppRuntime
  readonly httpPort: number
  readonly ports: Record<string, number>
  /** Stops accepting, lets in-flight requests finish, then stops workers and closes the database. */
  readonly stop: () => Promise<void>
}

export const start = async (settings: Settings, overrides: Overrides = {}, ports: { http?: number } = {}): Promise<Running> => {
  const runtime = makeRuntime(settings, overrides)
  // Build every layer (database + migrations) before opening any socket.
  await runtime.runPromise(Effect.void)
  // SMTP listeners first: once /healthz answers, every port takes connections. One that cannot
  // open (port taken, unusable certificate) closes the others and the runtime again.
  const opened: Array<{ name: string; port: number; close: () => Promise<void> }> = []
  /** A failed start leaves nothing open: the listeners that did open, then the runtime. */
  const abandon = async (e: unknown): Promise<never> => {
    await Promise.all(opened.map((o) => o.close()))
    await runtime.dispose()
    throw e
  }
  try {
    for (const l of listeners) opened.push({ name: l.name, ...(await l.start(runtime, settings)) })
  } catch (e) {
    await abandon(e)
  }
  const app = makeHttpApp({ routes: routesFor(settings), runtime, maxBodyBytes: settings.maxBodyBytes })
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: closeWhenBodyUnread(app.fetch), port: ports.http ?? settings.port, hostname: "0.0.0.0" }, () => {
      s.off("error", reject)
      resolve(s)
    })
    // A port that cannot open (taken, not allowed) fails the start like an SMTP port does.
    s.once("error", reject)
    // Before any connection: what Node's parser refuses still gets the envelope, and a log line.
    answerClientErrors(s as Server, ({ status, code, requestId }) =>
      runtime.runFork(Effect.logInfo("http").pipe(Effect.annotateLogs({ request_id: requestId, status, code }))))
  }).catch(abandon)
  const httpPort = (server.address() as AddressInfo).port
  await runtime.runPromise(
    Effect.logInfo("listening").pipe(
      Effect.annotateLogs({ http: httpPort, ...Object.fromEntries(opened.map((o) => [o.name, o.port])) }),
    ),
  )
  // One line per provider: which adapter runs, and whether it is a stand-in (warned about).
  for (const p of providerReport(settings)) {
    const line = `provider ${p.provider}: ${p.adapter} (${p.kind})`
    const annotated = { provider: p.provider, adapter: p.adapter, kind: p.kind }
    await runtime.runPromise(
      (p.kind === "stand-in" ? Effect.logWarning(line) : Effect.logInfo(line)).pipe(Effect.annotateLogs(annotated)),
    )
  }
  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      await Promise.all(opened.map((o) => o.close()))
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        // Idle keep-alive sockets would hold close() open; in-flight requests still finish.
        ;(server as { closeIdleConnections?: () => void }).closeIdleConnections?.()
      })
      await runtime.dispose()
    })())
  return { runtime, httpPort, ports: Object.fromEntries(opened.map((o) => [o.name, o.port])), stop }
}

