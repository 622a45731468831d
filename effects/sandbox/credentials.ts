/**
 * Sandbox credentials: disposable client_id/client_secret pairs and the account's one SMTP
 * username/password, both accepted by the sandbox SMTP server's AUTH. Secrets come from the
 * platform CSPRNG, are shown once, and only their SHA-256 is kept; a presented secret is hashed
 * and compared in constant time. Revoking a credential or regenerating the password takes effect
 * on the next AUTH, and on the next MAIL FROM of sessions already signed in (`recheck`).
 */
import { Clock, Context, Effect, Layer, Ref, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { AccountDisabled, type Forbidden, LimitReached, type NotFound, Unauthorized, ValidationError } from "../errors.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { randomHex, sha256Hex, timingSafeEqual } from "../shared/crypto.ts"
import { owned } from "../shared/ownership.ts"
import {
  type CreatedSandboxCredential,
  type CreateSandboxCredentialBody,
  CREDENTIAL_COLUMNS,
  SANDBOX_SCOPES,
  type SandboxCredential,
  type SandboxCredentialRow,
  type SandboxScope,
  type SandboxSmtpSettings,
  toSandboxCredential,
} from "./schema.ts"

/** Active credentials one account may hold (409 LIMIT_REACHED beyond). */
export const MAX_ACTIVE_CREDENTIALS = 100
export const SECRET_PREFIX_LENGTH = 12

/** Who signed in to the sandbox SMTP server. */
export interface SandboxLogin {
  readonly userId: number
  /** The credential used; null for the account's SMTP username/password. */
  readonly credentialId: number | null
  /** The AUTH username: a client_id or the SMTP username. */
  readonly username: string
  /** SHA-256 of the secret presented; `recheck` compares it with what is stored now. */
  readonly secretHash: string
  /** True for `full` credentials and for the SMTP username/password. */
  readonly full: boolean
  readonly scopes: ReadonlySet<SandboxScope>
}

export interface SandboxCredentialsShape {
  /** A new active credential; `client_secret` is in this answer only. */
  readonly create: (
    userId: number,
    body: CreateSandboxCredentialBody,
  ) => Effect.Effect<CreatedSandboxCredential, ValidationError | LimitReached | DbError>
  /** Every credential of the account, revoked ones included, newest first. */
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<SandboxCredential>, DbError>
  /** Revokes at once; 404 if no such credential, 403 if another account's. Idempotent. */
  readonly revoke: (userId: number, id: number) => Effect.Effect<SandboxCredential, NotFound | Forbidden | DbError>
  /** Host, port and username; the first call creates the login and is the only one showing its password. */
  readonly smtpSettings: (userId: number) => Effect.Effect<SandboxSmtpSettings, DbError>
  /** A new password (shown this once); the old one stops working at once. */
  readonly regenerateSmtpPassword: (userId: number) => Effect.Effect<SandboxSmtpSettings, DbError>
  /** SMTP AUTH: an SMTP username/password or an active client_id/client_secret. */
  readonly authenticate: (username: string, password: string) => Effect.Effect<SandboxLogin, Unauthorized | AccountDisabled | DbError>
  /** Fails unless the login still holds: credential not revoked, password not changed, account enabled. */
  readonly recheck: (login: SandboxLogin) => Effect.Effect<void, Unauthorized | AccountDisabled | DbError>
  /** The capture server tells where it listens (the real port when SANDBOX_SMTP_PORT is 0). */
  readonly listening: (port: number) => Effect.Effect<void>
}

/**
 * `full`, or the listed sandbox scopes (trimmed, duplicates dropped, order kept); unknown names
 * are a 400 on `scopes`.
 */
const normalizeScopes = (raw: string | undefined): Effect.Effect<string, ValidationError> => {
  if (raw === undefined) return Effect.succeed("full")
  const names = raw.split(",").map((s) => s.trim()).filter((s) => s !== "")
  const allowed = `allowed: full, ${SANDBOX_SCOPES.join(", ")}`
  if (names.length === 0) return Effect.fail(ValidationError.field("scopes", `Expected "full" or a comma-separated list of scopes; ${allowed}`))
  const unknown = names.filter((n) => n !== "full" && !(SANDBOX_SCOPES as ReadonlyArray<string>).includes(n))
  if (unknown.length > 0) {
    return Effect.fail(ValidationError.field("scopes", `unknown scope ${unknown.map((s) => `"${s}"`).join(", ")}; ${allowed}`))
  }
  return Effect.succeed(names.includes("full") ? "full" : [...new Set(names)].join(","))
}

const parseScopes = (stored: string): { full: boolean; scopes: ReadonlySet<SandboxScope> } => {
  const names = stored.split(",").map((s) => s.trim())
  const full = names.includes("full")
  return { full, scopes: new Set(full ? SANDBOX_SCOPES : SANDBOX_SCOPES.filter((s) => names.includes(s))) }
}

/** A stored secret's hash as found by an AUTH username, from either table. */
const LoginRow = Schema.Struct({
  user_id: Schema.Int,
  credential_id: Schema.NullOr(Schema.Int),
  secret_hash: Schema.String,
  scopes: Schema.String,
  revoked_at: Schema.NullOr(Schema.Date),
  disabled_at: Schema.NullOr(Schema.Date),
})

/** SMTP usernames and client ids are short tokens; anything longer is not ours. */
const MAX_USERNAME_LENGTH = 128
/** Compared against when the username matched nothing, so that case costs what a wrong secret costs. */
const NO_SUCH_SECRET = "0".repeat(64)

export class SandboxCredentials extends Context.Service<SandboxCredentials, SandboxCredentialsShape>()("app/SandboxCredentials") {
  static readonly layer = Layer.effect(
    SandboxCredentials,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const boundPort = yield* Ref.make<number | null>(null)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const create = Effect.fn("SandboxCredentials.create")(function*(userId: number, body: CreateSandboxCredentialBody) {
        const scopes = yield* normalizeScopes(body.scopes)
        const clientId = `sbx_${yield* randomHex(12)}`
        const secret = `sbs_${yield* randomHex(32)}`
        const hash = yield* sha256Hex(secret)
        const at = yield* now
        const row = yield* db.transaction(Effect.gen(function*() {
          // The account row lock serialises concurrent creations, so the cap holds.
          yield* db.query("SELECT id FROM users WHERE id = $1 FOR UPDATE", [userId])
          const [count] = yield* db.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM sandbox_credentials WHERE user_id = $1 AND revoked_at IS NULL",
            [userId],
          )
          if ((count?.n ?? 0) >= MAX_ACTIVE_CREDENTIALS) {
            return yield* new LimitReached({
              message: `an account can hold at most ${MAX_ACTIVE_CREDENTIALS} active sandbox credentials; revoke one first`,
            })
          }
          const [inserted] = yield* db.query<SandboxCredentialRow>(
            `INSERT INTO sandbox_credentials (user_id, client_id, client_secret_hash, client_secret_prefix, scopes, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${CREDENTIAL_COLUMNS}`,
            [userId, clientId, hash, secret.slice(0, SECRET_PREFIX_LENGTH), scopes, at],
          )
          return inserted!
        }))
        const shown = toSandboxCredential(row)
        return {
          id: shown.id,
          client_id: shown.client_id,
          client_secret: secret,
          client_secret_prefix: shown.client_secret_prefix,
          scopes: shown.scopes,
          status: shown.status,
          created_at: shown.created_at,
        }
      })

      const list = Effect.fn("SandboxCredentials.list")(function*(userId: number) {
        const rows = yield* db.query<SandboxCredentialRow>(
          `SELECT ${CREDENTIAL_COLUMNS} FROM sandbox_credentials WHERE user_id = $1 ORDER BY id DESC`,
          [userId],
        )
        return rows.map(toSandboxCredential)
      })

      const revoke = Effect.fn("SandboxCredentials.revoke")(function*(userId: number, id: number) {
        yield* owned("sandbox credential", yield* db.query<{ user_id: number }>("SELECT user_id FROM sandbox_credentials WHERE id = $1", [id]), userId)
        const [row] = yield* db.query<SandboxCredentialRow>(
          `UPDATE sandbox_credentials SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ${CREDENTIAL_COLUMNS}`,
          [id, yield* now],
        )
        return toSandboxCredential(row!)
      })

      const endpoint = Effect.map(Ref.get(boundPort), (port) => ({ host: config.sandboxSmtpHost, port: port ?? config.sandboxSmtpPort }))

      const smtpSettings = Effect.fn("SandboxCredentials.smtpSettings")(function*(userId: number) {
        const where = yield* endpoint
        const [existing] = yield* db.query<{ username: string }>("SELECT username FROM sandbox_smtp_logins WHERE user_id = $1", [userId])
        if (existing) return { ...where, username: existing.username }
        const username = `sbu_${yield* randomHex(8)}`
        const password = yield* randomHex(24)
        const at = yield* now
        // Two first calls at once: one inserts and shows its password, the other reads the winner's name.
        const [created] = yield* db.query<{ username: string }>(
          `INSERT INTO sandbox_smtp_logins (user_id, username, password_hash, password_set_at, created_at)
           VALUES ($1, $2, $3, $4, $4) ON CONFLICT (user_id) DO NOTHING RETURNING username`,
          [userId, username, yield* sha256Hex(password), at],
        )
        if (created) return { ...where, username: created.username, password }
        const [winner] = yield* db.query<{ username: string }>("SELECT username FROM sandbox_smtp_logins WHERE user_id = $1", [userId])
        return { ...where, username: winner!.username }
      })

      const regenerateSmtpPassword = Effect.fn("SandboxCredentials.regenerateSmtpPassword")(function*(userId: number) {
        const where = yield* endpoint
        const username = `sbu_${yield* randomHex(8)}`
        const password = yield* randomHex(24)
        const at = yield* now
        const [row] = yield* db.query<{ username: string }>(
          `INSERT INTO sandbox_smtp_logins AS l (user_id, username, password_hash, password_set_at, created_at)
           VALUES ($1, $2, $3, $4, $4)
           ON CONFLICT (user_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, password_set_at = EXCLUDED.password_set_at
           RETURNING l.username`,
          [userId, username, yield* sha256Hex(password), at],
        )
        return { ...where, username: row!.username, password }
      })

      /** The stored secret behind an AUTH username: the account's SMTP login or a credential. */
      const lookup = (username: string) =>
        queryAs(
          db,
          LoginRow,
          `SELECT l.user_id, NULL::bigint AS credential_id, l.password_hash AS secret_hash, 'full' AS scopes,
                  NULL::timestamptz AS revoked_at, u.disabled_at
             FROM sandbox_smtp_logins l JOIN users u ON u.id = l.user_id
            WHERE l.username = $1
           UNION ALL
           SELECT c.user_id, c.id, c.client_secret_hash, c.scopes, c.revoked_at, u.disabled_at
             FROM sandbox_credentials c JOIN users u ON u.id = c.user_id
            WHERE c.client_id = $1`,
          [username],
        )

      const unauthorized = () => new Unauthorized({ message: "authentication credentials invalid" })

      const authenticate = Effect.fn("SandboxCredentials.authenticate")(function*(username: string, password: string) {
        const hash = yield* sha256Hex(password)
        const [row] = username.length > 0 && username.length <= MAX_USERNAME_LENGTH ? yield* lookup(username) : []
        const matches = timingSafeEqual(row?.secret_hash ?? NO_SUCH_SECRET, hash)
        if (!row || !matches || row.revoked_at) return yield* unauthorized()
        if (row.disabled_at) return yield* new AccountDisabled({ message: "this account is disabled" })
        const at = yield* now
        // Throttled so an app opening a connection per message does not write on every AUTH.
        yield* row.credential_id === null
          ? db.query(
            `UPDATE sandbox_smtp_logins SET last_used_at = $2 WHERE user_id = $1
               AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '30 seconds')`,
            [row.user_id, at],
          )
          : db.query(
            `UPDATE sandbox_credentials SET last_used_at = $2 WHERE id = $1
               AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '30 seconds')`,
            [row.credential_id, at],
          )
        const scopes = parseScopes(row.scopes)
        return { userId: row.user_id, credentialId: row.credential_id, username, secretHash: hash, ...scopes } satisfies SandboxLogin
      })

      const recheck = Effect.fn("SandboxCredentials.recheck")(function*(login: SandboxLogin) {
        const [row] = yield* lookup(login.username)
        if (!row || row.revoked_at || !timingSafeEqual(row.secret_hash, login.secretHash)) return yield* unauthorized()
        if (row.disabled_at) return yield* new AccountDisabled({ message: "this account is disabled" })
      })

      const listening = (port: number) => Ref.set(boundPort, port)

      return SandboxCredentials.of({ create, list, revoke, smtpSettings, regenerateSmtpPassword, authenticate, recheck, listening })
    }),
  )
}
