/**
 * The settings every capability may read (DECISIONS.md "Configuration placeholders" and
 * "Providers"). Loaded and validated once by `src/config.ts`; services depend on this tag only.
 */
import { Context, Duration, Option } from "effect"

export interface Settings {
  readonly baseUrl: string
  readonly platformDomain: string
  readonly mxHost: string
  readonly mailServerIp: string
  readonly port: number
  readonly smtpPort: number
  readonly sandboxSmtpHost: string
  readonly sandboxSmtpPort: number
  readonly dataDir: string
  readonly databaseUrl: Option.Option<string>
  /** HS256 key for access tokens and signed links (32 bytes). */
  readonly jwtSecret: Uint8Array
  /** AES-256-GCM key for secrets kept at rest (32 bytes). */
  readonly secretsKey: Uint8Array
  readonly requirePhoneForOutbound: boolean
  readonly webhookAllowPrivate: boolean
  readonly webhookMaxAttempts: number
  readonly domainRecheckInterval: Duration.Duration
  readonly retentionInterval: Duration.Duration
  readonly dnsServers: ReadonlyArray<string>
  readonly smtpRelayUrl: Option.Option<string>
  readonly platformFrom: string
  readonly smsApiUrl: Option.Option<string>
  readonly smsApiKey: Option.Option<string>
  readonly smsSenderId: string
  readonly paymentApiUrl: Option.Option<string>
  readonly paymentApiKey: Option.Option<string>
  readonly paymentWebhookSecret: string
  readonly aiBaseUrl: Option.Option<string>
  readonly aiApiKey: Option.Option<string>
  readonly aiModel: string
  readonly googleClientId: Option.Option<string>
  readonly googleJwksUrl: string
  /** Largest accepted JSON body in bytes (attachments are base64 inside it). */
  readonly maxBodyBytes: number
  /** Largest accepted SMTP message in bytes (advertised with SIZE). */
  readonly maxMessageBytes: number
  readonly logLevel: "debug" | "info" | "warn" | "error"
  /** TLS_CERT_FILE / TLS_KEY_FILE: PEM certificate (chain) and key of the SMTP servers, reloaded on SIGHUP. */
  readonly tlsCertFile: Option.Option<string>
  readonly tlsKeyFile: Option.Option<string>
  /** SANDBOX_SMTPS_PORT: the sandbox's implicit-TLS port. */
  readonly sandboxSmtpsPort: number
  /**
   * NODE_ENV=production: start-up fails closed unless the keys are given and every provider is
   * configured or named as its stand-in (DECISIONS.md "Production mode"). Unset means false.
   */
  readonly production?: boolean
  /** PAYMENT_PROVIDER; unset: `http` when PAYMENT_API_URL is set, else the `fake` gateway. */
  readonly paymentProvider?: PaymentProvider
  /** MAIL_TRANSPORT (customer mail); unset: `relay` when SMTP_RELAY_URL is set, else `capture`. */
  readonly mailTransport?: MailTransport
  /** SMS_PROVIDER; unset: `http` when SMS_API_URL is set, else `log`. */
  readonly smsProvider?: SmsProvider
  /** PLATFORM_MAIL (verification links); unset: `relay` when SMTP_RELAY_URL is set, else `log`. */
  readonly platformMail?: PlatformMail
  /** Concurrent SMTP sessions per client IP, per server (the next gets 421 4.7.0). */
  readonly smtpMaxSessionsPerIp: number
  /** Message bytes the SMTP servers hold in memory together; larger messages spool to DATA_DIR. */
  readonly smtpMemoryBytes: number
  /**
   * INGEST_THREADS: worker threads that authenticate and parse received mail (0: on the event
   * loop). Default: one fewer than the cores, at most 4; on two cores or fewer, one
   * (src/config.ts `defaultIngestThreads`). On PGlite under Node the database's own thread takes
   * in-memory mail instead, and these threads only spooled mail (src/ingest/prepare-host.ts).
   */
  readonly ingestThreads: number
  /**
   * INGEST_LOOP_BYTES: where threads run, in-memory messages of at least this many bytes are
   * prepared on the event loop all the same (0: every in-memory message; spooled ones always go
   * to a thread). Default: 65536 (src/config.ts `LOOP_PREPARE_BYTES`).
   */
  readonly ingestLoopBytes: number
  /**
   * INGEST_REUSED_ON_LOOP: where threads run, a message on a connection that already carried one
   * is prepared on the event loop, whatever its size. Default: true with a PostgreSQL server,
   * false on PGlite (src/config.ts `reusedOnLoopFor`).
   */
  readonly ingestReusedOnLoop: boolean
  /**
   * MX_THREAD: the MX's SMTP protocol (sockets, TLS, reading DATA) runs on a thread of its own and
   * asks the event loop only for the steps that need the service (src/smtp/mx-threaded.ts, which
   * says what it trades). Off by default.
   */
  readonly mxThread: boolean
  /**
   * INGEST_BLOB_BYTES: received messages of at least this many bytes keep their body as a file in
   * `DATA_DIR/blobs` instead of the database (effects/ports/MimeBlobs.ts); 0: always in the database.
   * Default: 65536 on PGlite, 0 with a PostgreSQL server.
   */
  readonly ingestBlobBytes: number
}

export type PaymentProvider = "fake" | "http"
export type MailTransport = "capture" | "relay"
export type SmsProvider = "log" | "http"
export type PlatformMail = "log" | "relay"

/** The adapter each provider runs with: the explicit choice, else the one its settings imply. */
export const chosenProviders = (s: Settings) => ({
  payment: s.paymentProvider ?? (Option.isSome(s.paymentApiUrl) ? "http" : "fake") as PaymentProvider,
  outboundMail: s.mailTransport ?? (Option.isSome(s.smtpRelayUrl) ? "relay" : "capture") as MailTransport,
  platformMail: s.platformMail ?? (Option.isSome(s.smtpRelayUrl) ? "relay" : "log") as PlatformMail,
  sms: s.smsProvider ?? (Option.isSome(s.smsApiUrl) ? "http" : "log") as SmsProvider,
})

/** Whether SMS leaves this server: the HTTP adapter is chosen and has a URL (else the log stand-in runs). */
export const smsSends = (s: Settings): boolean => chosenProviders(s).sms === "http" && Option.isSome(s.smsApiUrl)

export class AppConfig extends Context.Service<AppConfig, Settings>()("app/AppConfig") {}
