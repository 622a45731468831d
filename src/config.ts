/**
 * Every setting of DECISIONS.md, typed with Effect `Config`, with the embedded defaults.
 * A bad value stops start-up with one line naming the variable. `JWT_SECRET` and `SECRETS_KEY`
 * are generated once into `DATA_DIR/secrets.json` when unset, so restarts keep tokens and
 * encrypted secrets valid; with NODE_ENV=production they must be given (src/production.ts).
 */
import { Config, ConfigProvider, Duration, Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Settings } from "../effects/config.ts"
import type { DatabaseShape } from "../effects/ports/Database.ts"
import { fromHex, randomHexSync } from "../effects/shared/crypto.ts"
import { choiceProblems, PROVIDER_CHOICES, productionProblems } from "./production.ts"

/** A start-up configuration problem, printed as one line. */
export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", { message: Schema.String }) {}

/** `2s`, `5m`, `1h`, `1d`, `250ms` (DECISIONS.md: durations in settings). */
export const parseDuration = (raw: string): Option.Option<Duration.Duration> => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(raw)
  if (!m) return Option.none()
  const n = Number(m[1])
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as "ms" | "s" | "m" | "h" | "d"]
  return n > 0 ? Option.some(Duration.millis(n * unit)) : Option.none()
}

const hexKey = (name: string) => Config.option(Config.String(name))

const optionalString = (name: string) =>
  Config.option(Config.String(name)).pipe(Config.map(Option.filter((s) => s.trim() !== "")))

/**
 * Prepare threads when INGEST_THREADS is not set. One core stays for the event loop (SMTP, HTTP,
 * commits) and the rest prepare mail, at most 4; on two cores or fewer, one. It starts with the
 * first message sent its way, so the idle RSS does not pay for it; which messages go there is
 * `LOOP_PREPARE_BYTES`'s and `reusedOnLoopFor`'s.
 *
 * On two cores with a PostgreSQL server this was none until 2026-11-27: with every message on the
 * thread, 100 KiB mail peaked 50–120 MiB higher and nothing was faster. With large mail kept on
 * the loop, one message per connection (200 sessions, all 2 KiB, so on the thread either way) went
 * 1,019–1,078 → 1,166–1,329 msgs/s in seven interleaved pairs, at the same CPU per message, and 2 KiB over 20 reused sessions −5 %
 * (more CPU per message on a machine that also runs the database and the load); 100 KiB mail as
 * before (bench/REPORT.md, MX ingest, 2026-11-27 third session). On PGlite the thread made
 * one-message sessions 13 % faster (2026-11-26 afternoon).
 */
export const defaultIngestThreads = (cores: number): number => (cores <= 2 ? 1 : Math.min(4, cores - 1))

/**
 * In-memory messages of this size or more are prepared on the event loop even where threads run.
 * A 100 KiB message on a thread cost more than it saved: the thread's own V8 heap and malloc arena
 * grew with the bodies it parsed, and the prepared bytes came back across. 100 KiB mail over 20
 * sessions, interleaved pairs (bench/REPORT.md, MX ingest, 2026-11-27 third session): on PGlite
 * 383 / 361 against 357 / 352 msgs/s at 3.7 against 4.5 ms of CPU per message and 349–353
 * against 374–377 MiB peak; on PostgreSQL with a thread 396–414 msgs/s at 285–306 MiB, against
 * 396–437 at 405–418 with every message on it. Parsing one on the loop takes it ~1 ms. Spooled
 * messages (over 1 MiB, read from their file) still go to a thread: several ms of parsing each.
 *
 * The same on every engine and core count. With a PostgreSQL server on two cores it was 0 (every
 * in-memory message on the loop) from 2026-11-28 to 2026-11-29: the thirteenth session measured
 * the thread's round trip at ~0.9 ms of waiting for ~0.06 ms of work, 20 reused sessions +7 % on
 * the loop and one message per connection −4 %, and the reused line was the one short of its
 * target. On the twenty-seventh session's machine, with the bench's peer driven like the service,
 * the reused line had the margin (median 0.61 of the peer) and one message per connection little
 * (0.83). The thread against the loop there, interleaved pairs: one message per connection +5 %
 * and +15 % (sets of eight and six, in both orders), +6 % with 20 accounts (four pairs); 20 reused
 * sessions −1 % and −7 %, −1 % with 20 accounts; ~40 MiB more peak RSS once the thread runs
 * (bench/REPORT.md, MX ingest). Mail from many senders mostly reaches an MX one message per
 * connection. On PGlite four pairs had shown no gain from the loop. Large mail stays on the loop
 * either way (above): under 100 KiB mail the thread never starts.
 */
export const LOOP_PREPARE_BYTES = 64 * 1024

/**
 * INGEST_REUSED_ON_LOOP when not set: with a PostgreSQL server, a message that arrives on a
 * connection that already carried one is prepared on the event loop, whatever its size
 * (src/ingest/prepare-pool.ts `placed`). Such a sender sends its mail one message after another
 * and waits for each 250, and the hop to the thread and back (~1.1 ms under load for ~0.07 ms of
 * work, end of DATA → 250 5.65 ms in all) is on its path. A connection's first message still goes
 * to the thread: one-message connections arrive in waves, and there the thread keeps the event
 * loop free for the other sessions (every message on the loop, INGEST_LOOP_BYTES=0: −3 %).
 * Interleaved pairs on two cores (bench/REPORT.md, MX ingest, thirty-seventh session):
 * - with PostgreSQL, 2 KiB over 20 reused sessions +15 % as built (2,159 → 2,487.5 msgs/s, eight
 *   pairs of eight faster; +8 % and +5.4 % as prototypes), one message per connection unchanged to
 *   20 accounts (1,078.5 → 1,081) and −3 % to one (three pairs of eight faster);
 * - on PGlite, reused sessions +11 %, but one message per connection to 20 accounts −3 %, most of
 *   it from the preparing code loaded on the event loop (−2 % with that alone). On PGlite the
 *   reused line has margin to spare and the one-message line none: off there.
 */
export const reusedOnLoopFor = (engine: DatabaseShape["dialect"]): boolean => engine === "postgres"

/**
 * INGEST_BLOB_BYTES when not set with PGlite: the raw MIME of a message this large goes to a file
 * (src/providers/blob-files.ts). 100 KiB messages on PGlite: +13–15 % msgs/s and 26–40 MiB less
 * peak RSS with their bodies out of the database (bench/REPORT.md, MX ingest); for a few KiB a
 * file of its own costs more than the database's pages.
 */
export const DEFAULT_BLOB_BYTES = 64 * 1024

const raw = Config.all({
  baseUrl: Config.String("BASE_URL").pipe(Config.withDefault("")),
  platformDomain: Config.String("PLATFORM_DOMAIN").pipe(Config.withDefault("inbox.localhost")),
  mxHost: optionalString("MX_HOST"),
  mailServerIp: Config.String("MAIL_SERVER_IP").pipe(Config.withDefault("127.0.0.1")),
  port: Config.Port("PORT").pipe(Config.withDefault(8080)),
  smtpPort: Config.option(Config.Port("SMTP_PORT")),
  sandboxSmtpHost: Config.String("SANDBOX_SMTP_HOST").pipe(Config.withDefault("localhost")),
  sandboxSmtpPort: Config.Port("SANDBOX_SMTP_PORT").pipe(Config.withDefault(2526)),
  dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./data")),
  databaseUrl: optionalString("DATABASE_URL"),
  jwtSecret: hexKey("JWT_SECRET"),
  secretsKey: hexKey("SECRETS_KEY"),
  requirePhoneForOutbound: Config.Boolean("REQUIRE_PHONE_FOR_OUTBOUND").pipe(Config.withDefault(false)),
  webhookAllowPrivate: Config.option(Config.Boolean("WEBHOOK_ALLOW_PRIVATE")),
  webhookMaxAttempts: Config.Int("WEBHOOK_MAX_ATTEMPTS").pipe(Config.withDefault(3)),
  domainRecheckInterval: Config.String("DOMAIN_RECHECK_INTERVAL").pipe(Config.withDefault("1h")),
  retentionInterval: Config.String("RETENTION_INTERVAL").pipe(Config.withDefault("1h")),
  dnsServers: Config.String("DNS_SERVERS").pipe(Config.withDefault("")),
  smtpRelayUrl: optionalString("SMTP_RELAY_URL"),
  platformFrom: optionalString("PLATFORM_FROM"),
  smsApiUrl: optionalString("SMS_API_URL"),
  smsApiKey: optionalString("SMS_API_KEY"),
  smsSenderId: Config.String("SMS_SENDER_ID").pipe(Config.withDefault("TZMAIL")),
  paymentApiUrl: optionalString("PAYMENT_API_URL"),
  paymentApiKey: optionalString("PAYMENT_API_KEY"),
  paymentWebhookSecret: optionalString("PAYMENT_WEBHOOK_SECRET"),
  aiBaseUrl: optionalString("AI_BASE_URL"),
  aiApiKey: optionalString("AI_API_KEY"),
  aiModel: Config.String("AI_MODEL").pipe(Config.withDefault("gpt-4o-mini")),
  googleClientId: optionalString("GOOGLE_CLIENT_ID"),
  googleJwksUrl: Config.String("GOOGLE_JWKS_URL").pipe(Config.withDefault("https://www.googleapis.com/oauth2/v3/certs")),
  maxBodyBytes: Config.Int("MAX_BODY_BYTES").pipe(Config.withDefault(30 * 1024 * 1024)),
  maxMessageBytes: Config.Int("MAX_MESSAGE_BYTES").pipe(Config.withDefault(25 * 1024 * 1024)),
  logLevel: Config.Literals(["debug", "info", "warn", "error"], "LOG_LEVEL").pipe(Config.withDefault("info" as const)),
  tlsCertFile: optionalString("TLS_CERT_FILE"),
  tlsKeyFile: optionalString("TLS_KEY_FILE"),
  sandboxSmtpsPort: Config.Port("SANDBOX_SMTPS_PORT").pipe(Config.withDefault(2465)),
  nodeEnv: Config.String("NODE_ENV").pipe(Config.withDefault("")),
  paymentProvider: optionalString("PAYMENT_PROVIDER"),
  mailTransport: optionalString("MAIL_TRANSPORT"),
  smsProvider: optionalString("SMS_PROVIDER"),
  platformMail: optionalString("PLATFORM_MAIL"),
  smtpMaxSessionsPerIp: Config.Int("SMTP_MAX_SESSIONS_PER_IP").pipe(Config.withDefault(20)),
  smtpMemoryBytes: Config.Int("SMTP_MEMORY_BYTES").pipe(Config.withDefault(256 * 1024 * 1024)),
  ingestThreads: Config.option(Config.Int("INGEST_THREADS")),
  ingestLoopBytes: Config.option(Config.Int("INGEST_LOOP_BYTES")),
  ingestReusedOnLoop: Config.option(Config.Boolean("INGEST_REUSED_ON_LOOP")),
  mxThread: Config.Boolean("MX_THREAD").pipe(Config.withDefault(false)),
  ingestBlobBytes: Config.option(Config.Int("INGEST_BLOB_BYTES")),
})

/** An explicit provider choice: unset, or one of its names (src/production.ts). */
const choiceOf = <K extends keyof typeof PROVIDER_CHOICES>(name: K, value: Option.Option<string>) =>
  Option.match(value, {
    onNone: () => Effect.succeed(Option.none<typeof PROVIDER_CHOICES[K][number]>()),
    onSome: (v) =>
      (PROVIDER_CHOICES[name] as ReadonlyArray<string>).includes(v)
        ? Effect.succeed(Option.some(v as typeof PROVIDER_CHOICES[K][number]))
        : Effect.fail(new ConfigInvalid({ message: `Invalid setting ${name}: expected one of ${PROVIDER_CHOICES[name].join(", ")}, got "${v}"` })),
  })

/**
 * Keys kept in DATA_DIR when not given by env; created once with owner-only permissions.
 *
 * The file appears whole or not at all: it is written under a name of this process's own and then
 * linked into place, which fails if another process got there first (we then read theirs). With
 * WEB_CONCURRENCY the workers start together on a fresh DATA_DIR; creating the file with "wx" and
 * then writing it let a sibling read it empty in between and die on the JSON (a CI failure of
 * test/process/cluster.test.ts).
 */
const persistedKeys = (dataDir: string): { jwtSecret: Uint8Array; secretsKey: Uint8Array; paymentWebhookSecret: string } => {
  const file = path.join(dataDir, "secrets.json")
  fs.mkdirSync(dataDir, { recursive: true })
  if (!fs.existsSync(file)) {
    const fresh = { jwt_secret: randomHexSync(32), secrets_key: randomHexSync(32), payment_webhook_secret: randomHexSync(32) }
    const own = `${file}.${process.pid}.${randomHexSync(4)}.tmp`
    fs.writeFileSync(own, JSON.stringify(fresh, null, 2), { mode: 0o600, flag: "wx" })
    try {
      fs.linkSync(own, file)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    } finally {
      fs.rmSync(own, { force: true })
    }
  }
  const stored = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, string>
  return {
    jwtSecret: fromHex(stored.jwt_secret!),
    secretsKey: fromHex(stored.secrets_key!),
    paymentWebhookSecret: stored.payment_webhook_secret ?? randomHexSync(32),
  }
}

const oneLine = (e: Config.ConfigError): string => {
  const text = String(e.message).replace(/^SchemaError\(/, "").replace(/\)$/, "")
  const at = /at \["([^"]+)"\]/.exec(text)
  const reason = text.split("\n")[0]!.trim()
  return at ? `Invalid setting ${at[1]}: ${reason}` : `Invalid configuration: ${reason}`
}

/** Loads and validates every setting from a provider (the environment unless given). */
export const loadSettings = (provider: ConfigProvider.ConfigProvider = ConfigProvider.fromEnv()) =>
  Effect.gen(function*() {
    const r = yield* raw.parse(provider).pipe(Effect.mapError((e) => new ConfigInvalid({ message: oneLine(e) })))
    if (r.webhookMaxAttempts < 1 || r.webhookMaxAttempts > 20) {
      return yield* new ConfigInvalid({ message: "Invalid setting WEBHOOK_MAX_ATTEMPTS: expected an integer from 1 to 20" })
    }
    if (Option.isSome(r.tlsCertFile) !== Option.isSome(r.tlsKeyFile)) {
      return yield* new ConfigInvalid({ message: "Invalid setting TLS_CERT_FILE / TLS_KEY_FILE: set both (PEM certificate and its key) or neither" })
    }
    if (Option.isSome(r.databaseUrl) && !/^postgres(ql)?:\/\//.test(r.databaseUrl.value)) {
      return yield* new ConfigInvalid({ message: "Invalid setting DATABASE_URL: expected postgres://user@host:port/db" })
    }
    if (r.smtpMaxSessionsPerIp < 1) {
      return yield* new ConfigInvalid({ message: "Invalid setting SMTP_MAX_SESSIONS_PER_IP: expected a positive integer" })
    }
    const ingestThreads = Option.getOrElse(r.ingestThreads, () => defaultIngestThreads(os.availableParallelism()))
    if (ingestThreads < 0 || ingestThreads > 64) {
      return yield* new ConfigInvalid({ message: "Invalid setting INGEST_THREADS: expected 0 (on the event loop) to 64" })
    }
    const engine: DatabaseShape["dialect"] = Option.isNone(r.databaseUrl) ? "pglite" : "postgres"
    const ingestLoopBytes = Option.getOrElse(r.ingestLoopBytes, () => LOOP_PREPARE_BYTES)
    if (ingestLoopBytes < 0) {
      return yield* new ConfigInvalid({ message: "Invalid setting INGEST_LOOP_BYTES: expected 0 (every in-memory message on the event loop) or a size in bytes" })
    }
    const ingestReusedOnLoop = Option.getOrElse(r.ingestReusedOnLoop, () => reusedOnLoopFor(engine))
    const ingestBlobBytes = Option.getOrElse(r.ingestBlobBytes, () => (engine === "pglite" ? DEFAULT_BLOB_BYTES : 0))
    if (ingestBlobBytes < 0) {
      return yield* new ConfigInvalid({ message: "Invalid setting INGEST_BLOB_BYTES: expected 0 (bodies in the database) or a size in bytes" })
    }
    if (r.smtpMemoryBytes < 1024 * 1024) {
      return yield* new ConfigInvalid({ message: "Invalid setting SMTP_MEMORY_BYTES: expected at least 1048576 (1 MiB)" })
    }
    const durationOf = (name: string, value: string) =>
      Option.match(parseDuration(value), {
        onNone: () => Effect.fail(new ConfigInvalid({ message: `Invalid setting ${name}: expected a duration like 30s, 5m or 1h, got "${value}"` })),
        onSome: Effect.succeed,
      })
    const keyOf = (name: string, value: Option.Option<string>) =>
      Option.match(value, {
        onNone: () => Effect.succeed(Option.none<Uint8Array>()),
        onSome: (hex) =>
          /^[0-9a-fA-F]{64}$/.test(hex)
            ? Effect.succeed(Option.some(fromHex(hex.toLowerCase())))
            : Effect.fail(new ConfigInvalid({ message: `Invalid setting ${name}: expected 32 bytes as 64 hex characters` })),
      })
    const domainRecheckInterval = yield* durationOf("DOMAIN_RECHECK_INTERVAL", r.domainRecheckInterval)
    const retentionInterval = yield* durationOf("RETENTION_INTERVAL", r.retentionInterval)
    const jwtSecret = yield* keyOf("JWT_SECRET", r.jwtSecret)
    const secretsKey = yield* keyOf("SECRETS_KEY", r.secretsKey)
    const production = r.nodeEnv === "production"
    const providers = {
      jwtSecret,
      secretsKey,
      smtpRelayUrl: r.smtpRelayUrl,
      smsApiUrl: r.smsApiUrl,
      smsApiKey: r.smsApiKey,
      paymentApiUrl: r.paymentApiUrl,
      paymentApiKey: r.paymentApiKey,
      paymentWebhookSecret: r.paymentWebhookSecret,
      paymentProvider: yield* choiceOf("PAYMENT_PROVIDER", r.paymentProvider),
      mailTransport: yield* choiceOf("MAIL_TRANSPORT", r.mailTransport),
      smsProvider: yield* choiceOf("SMS_PROVIDER", r.smsProvider),
      platformMail: yield* choiceOf("PLATFORM_MAIL", r.platformMail),
    }
    // Every problem at once, one line each, so an operator fixes them in one go.
    const problems = [...choiceProblems(providers), ...(production ? productionProblems(providers) : [])]
    if (problems.length > 0) return yield* new ConfigInvalid({ message: problems.join("\n") })
    const needsPersisted = Option.isNone(jwtSecret) || Option.isNone(secretsKey) || Option.isNone(r.paymentWebhookSecret)
    const kept = needsPersisted ? yield* Effect.sync(() => persistedKeys(r.dataDir)) : undefined
    const { nodeEnv: _nodeEnv, ...settingsFromEnv } = r
    const settings: Settings = {
      ...settingsFromEnv,
      production,
      paymentProvider: Option.getOrUndefined(providers.paymentProvider),
      mailTransport: Option.getOrUndefined(providers.mailTransport),
      smsProvider: Option.getOrUndefined(providers.smsProvider),
      platformMail: Option.getOrUndefined(providers.platformMail),
      // Production defaults (DECISIONS.md): the MX on port 25, webhooks to public addresses only.
      smtpPort: Option.getOrElse(r.smtpPort, () => (production ? 25 : 2525)),
      ingestThreads,
      ingestLoopBytes,
      ingestReusedOnLoop,
      mxThread: r.mxThread,
      ingestBlobBytes,
      webhookAllowPrivate: Option.getOrElse(r.webhookAllowPrivate, () => !production),
      baseUrl: (r.baseUrl || `http://localhost:${r.port}`).replace(/\/+$/, ""),
      mxHost: Option.getOrElse(r.mxHost, () => `mx.${r.platformDomain}`),
      dnsServers: r.dnsServers.split(",").map((s) => s.trim()).filter((s) => s !== ""),
      domainRecheckInterval,
      retentionInterval,
      jwtSecret: Option.getOrElse(jwtSecret, () => kept!.jwtSecret),
      secretsKey: Option.getOrElse(secretsKey, () => kept!.secretsKey),
      paymentWebhookSecret: Option.getOrElse(r.paymentWebhookSecret, () => kept!.paymentWebhookSecret),
      platformFrom: Option.getOrElse(r.platformFrom, () => `noreply@${r.platformDomain}`),
    }
    return settings
  })
