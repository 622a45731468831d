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
  /** Concurrent SMTP sessions per client IP, per server (the next gets 421 4.7.0). */
  readonly smtpMaxSessionsPerIp: number
  /** Message bytes the SMTP servers hold in memory together; larger messages spool to DATA_DIR. */
  readonly smtpMemoryBytes: number
}

export class AppConfig extends Context.Service<AppConfig, Settings>()("app/AppConfig") {}
