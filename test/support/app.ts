/**
 * The test app: the real service (runtime, HTTP on a real socket, SMTP listeners) on port 0,
 * over a fresh database, with quiet logs. Tests talk to it with `api.call(...)` over HTTP and
 * reach services directly with `api.run(effect)`.
 */
import { Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"
import type { Settings } from "../../effects/config.ts"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import { LOOP_PREPARE_BYTES, reusedOnLoopFor } from "../../src/config.ts"
import type { AppServices } from "../../src/layers.ts"
import { quietLoggerLayer } from "../../src/logger.ts"
import { type Running, start } from "../../src/runtime.ts"
import { generatedFiles } from "../../src/smtp/tls.ts"
import { type TestDatabase, testDatabase, testDatabaseUrl } from "./db.ts"
import { TEST_MX_HOST } from "./mx-host.ts"

/** The run's certificate (test/support/global-setup.ts) into a fresh DATA_DIR, as src/smtp/tls.ts leaves a generated one. */
const copyRunCertificate = (settings: Settings) => {
  const run = inject("testCertificate")
  if (settings.mxHost !== run.host) return
  const files = generatedFiles(settings.dataDir, settings.mxHost)
  fs.mkdirSync(path.dirname(files.dir), { recursive: true, mode: 0o700 })
  fs.cpSync(run.dir, files.dir, { recursive: true })
}

/**
 * Settings of a test app, on a fresh DATA_DIR unless `overrides` names one.
 *
 * `certificate`: where the self-signed certificate of an app on a fresh DATA_DIR (outside
 * production, without TLS files) comes from. By default the run's own for the default MX_HOST,
 * copied in where the service keeps the one it generates, so the start reads it back as every
 * later start does: making one costs a child process and an RSA key, ~1 s of CPU per app start.
 * "generate": the service makes its own, for the tests of that.
 */
export const testSettings = (overrides: Partial<Settings> = {}, certificate: "run" | "generate" = "run"): Settings => {
  const settings = defaultSettings(overrides)
  const own = certificate === "generate" || settings.production || Option.isSome(settings.tlsCertFile) || overrides.dataDir !== undefined
  if (!own) copyRunCertificate(settings)
  return settings
}

const defaultSettings = (overrides: Partial<Settings>): Settings => ({
  baseUrl: "http://localhost:8080",
  platformDomain: "inbox.localhost",
  mxHost: TEST_MX_HOST,
  mailServerIp: "127.0.0.1",
  port: 0,
  smtpPort: 0,
  sandboxSmtpHost: "localhost",
  sandboxSmtpPort: 0,
  dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "mailapi-test-")),
  databaseUrl: Option.none(),
  jwtSecret: new TextEncoder().encode(randomHexSync(16)),
  secretsKey: new TextEncoder().encode(randomHexSync(16)),
  requirePhoneForOutbound: false,
  webhookAllowPrivate: true,
  webhookMaxAttempts: 3,
  domainRecheckInterval: "1 hour" as never,
  retentionInterval: "1 hour" as never,
  dnsServers: [],
  smtpRelayUrl: Option.none(),
  platformFrom: "noreply@inbox.localhost",
  smsApiUrl: Option.none(),
  smsApiKey: Option.none(),
  smsSenderId: "TZMAIL",
  paymentApiUrl: Option.none(),
  paymentApiKey: Option.none(),
  paymentWebhookSecret: "test-payment-secret",
  aiBaseUrl: Option.none(),
  aiApiKey: Option.none(),
  aiModel: "test-model",
  googleClientId: Option.none(),
  googleJwksUrl: "https://www.googleapis.com/oauth2/v3/certs",
  maxBodyBytes: 30 * 1024 * 1024,
  maxMessageBytes: 25 * 1024 * 1024,
  logLevel: "error",
  tlsCertFile: Option.none(),
  tlsKeyFile: Option.none(),
  sandboxSmtpsPort: 0,
  production: false,
  smtpMaxSessionsPerIp: 20,
  smtpMemoryBytes: 256 * 1024 * 1024,
  // One prepare thread, taking all but large in-memory mail: the production default on 2 cores
  // (INGEST_THREADS=0, all on the event loop, has its own runs in test/inbound/prepare.test.ts and
  // test/smtp/corpus.test.ts). On PGlite the database's own thread takes in-memory mail instead
  // (src/ingest/prepare-host.ts) and the worker only spooled mail.
  ingestThreads: 1,
  ingestLoopBytes: LOOP_PREPARE_BYTES,
  // The production default of the engine under test (on with PostgreSQL, off on PGlite).
  ingestReusedOnLoop: reusedOnLoopFor(testDatabaseUrl ? "postgres" : "pglite"),
  // The MX's protocol on the event loop, the default (test/smtp/mx-thread.test.ts runs it on its thread).
  mxThread: false,
  // PGlite's default on both engines, so the PostgreSQL pass stores large bodies as files too.
  ingestBlobBytes: 64 * 1024,
  ...overrides,
})

export interface CallOptions {
  readonly body?: unknown
  /** Sent as-is (for malformed JSON tests). */
  readonly rawBody?: string
  /** A JWT or an API key, sent as `Authorization: Bearer …`. */
  readonly token?: string
  readonly headers?: Record<string, string>
}

export interface CallResult {
  readonly status: number
  readonly headers: Headers
  // deno-lint-ignore no-explicit-any
  readonly body: any
}

export interface TestApp extends Running {
  readonly url: string
  readonly settings: Settings
  readonly call: (method: string, path: string, options?: CallOptions) => Promise<CallResult>
  readonly run: <A, E>(effect: Effect.Effect<A, E, AppServices>) => Promise<A>
}

export interface TestAppOptions {
  readonly settings?: Partial<Settings>
  /** Workers are on by default; tests that drive a worker step by step turn them off. */
  readonly workers?: boolean
  readonly infrastructure?: Layer.Layer<never>
  /** A database the test owns and keeps after `stop` (to start a second app on the same data). */
  readonly database?: TestDatabase
  /** Where the self-signed certificate comes from (`testSettings`). */
  readonly certificate?: "run" | "generate"
}

export const makeTestApp = async (options: TestAppOptions = {}): Promise<TestApp> => {
  const settings = testSettings(options.settings, options.certificate)
  const db = options.database ?? testDatabase()
  const running = await start(
    settings,
    {
      database: db.layer,
      logger: quietLoggerLayer,
      workers: options.workers ?? true,
      ...(options.infrastructure ? { infrastructure: options.infrastructure } : {}),
    },
    { http: 0 },
  )
  const url = `http://127.0.0.1:${running.httpPort}`
  const call = async (method: string, p: string, o: CallOptions = {}): Promise<CallResult> => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) }
    if (o.token) headers.authorization = `Bearer ${o.token}`
    let body: string | undefined
    if (o.rawBody !== undefined) body = o.rawBody
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body)
      headers["content-type"] ??= "application/json"
    }
    const res = await fetch(url + p, { method, headers, body })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch { /* not JSON (docs page, raw MIME) */ }
    return { status: res.status, headers: res.headers, body: parsed }
  }
  return {
    ...running,
    url,
    settings,
    call,
    run: (effect) => running.runtime.runPromise(effect),
    stop: async () => {
      await running.stop()
      if (!options.database) await db.drop()
      // A DATA_DIR the caller gave is the caller's (a restart test starts the next app on it).
      if (!options.settings?.dataDir) fs.rmSync(settings.dataDir, { recursive: true, force: true })
    },
  }
}
