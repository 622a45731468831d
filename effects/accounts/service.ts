/**
 * Accounts: registration, password and Google sign-in, token refresh, the profile, and the
 * operator's account switches. Sessions (sessions.ts) and email/phone proofs (verification.ts)
 * are separate services this one composes; its layer provides all three.
 *
 * Sign-in failures are uniform: an unknown identifier, a Google-only account and a wrong
 * password all answer the same 401 after the same amount of hashing work, so neither the
 * message nor the timing tells whether an account exists.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { GoogleIdentity } from "../auth/google.ts"
import {
  AccountDisabled,
  Conflict,
  type NotConfigured,
  NotFound,
  type ProviderError,
  type RateLimited,
  Unauthorized,
  ValidationError,
} from "../errors.ts"
import { Database, type DbError, isUniqueViolation, queryAs } from "../ports/Database.ts"
import { RateLimiter } from "../ratelimit/service.ts"
import { EMAIL_PATTERN, normalizeTzPhone, TZ_PHONE_PATTERN } from "../shared/schema.ts"
import { AuthRateLimits } from "./limits.ts"
import { hashPassword, needsRehash, PasswordHashing, verifyPassword } from "./password.ts"
import { type AuthTokens, type LoginBody, type RegisterBody, toUser, type UpdateMeBody, type User, USER_COLUMNS, UserRow, UserWithGoogleRow, UserWithPasswordRow } from "./schema.ts"
import { Sessions } from "./sessions.ts"
import { Verification } from "./verification.ts"

/** Who is asking, as far as rate limits care. */
export interface RequestMeta {
  readonly ip: string
}

export interface AccountsShape {
  /** Creates the account, signs it in, and sends the email link and/or SMS code. */
  readonly register: (body: RegisterBody, meta: RequestMeta) => Effect.Effect<AuthTokens, ValidationError | Conflict | RateLimited | DbError>
  readonly login: (
    body: LoginBody,
    meta: RequestMeta,
  ) => Effect.Effect<AuthTokens, ValidationError | Unauthorized | AccountDisabled | RateLimited | DbError>
  /** Signs in with a Google id_token: the linked account, an account with the same verified email, or a new one. */
  readonly google: (
    idToken: string,
    meta: RequestMeta,
  ) => Effect.Effect<AuthTokens, ValidationError | Unauthorized | AccountDisabled | Conflict | NotConfigured | ProviderError | RateLimited | DbError>
  readonly refresh: (refreshToken: string, meta: RequestMeta) => Effect.Effect<AuthTokens, Unauthorized | AccountDisabled | RateLimited | DbError>
  readonly get: (userId: number) => Effect.Effect<User, NotFound | DbError>
  /** Changes name and/or company name; omitted fields stay as they are. */
  readonly update: (userId: number, patch: UpdateMeBody) => Effect.Effect<User, NotFound | DbError>
  /** Operator: a disabled account's keys and tokens answer 403 ACCOUNT_DISABLED from the next request on. */
  readonly setDisabled: (userId: number, disabled: boolean) => Effect.Effect<User, NotFound | DbError>
  /** Operator: marks the account's email and phone (those it has) as verified. */
  readonly verifyIdentity: (userId: number) => Effect.Effect<User, NotFound | DbError>
}

const wrongCredentials = () => new Unauthorized({ message: "invalid identifier or password" })
const disabled = () => new AccountDisabled({ message: "this account is disabled" })

/** The login identifier as stored: a lowercase email, or a phone number in +255 form. */
const parseIdentifier = (raw: string): Option.Option<{ column: "email" | "phone_number"; value: string }> => {
  const s = raw.trim()
  if (s.includes("@")) return EMAIL_PATTERN.test(s) ? Option.some({ column: "email", value: s.toLowerCase() }) : Option.none()
  const compact = s.replace(/[\s-]/g, "")
  return TZ_PHONE_PATTERN.test(compact) ? Option.some({ column: "phone_number", value: normalizeTzPhone(compact) }) : Option.none()
}

/** A unique violation as 409 (its `field` from the constraint's name when it has one); other failures pass. */
const uniqueAsConflict = (message: string, fallbackField: string) => (e: DbError): Effect.Effect<never, Conflict | DbError> =>
  isUniqueViolation(e)
    ? Effect.fail(
      new Conflict({
        message,
        field: e.constraint?.includes("phone") ? "phone_number" : e.constraint?.includes("email") ? "email" : fallbackField,
      }),
    )
    : Effect.fail(e)

export class Accounts extends Context.Service<Accounts, AccountsShape>()("app/Accounts") {
  /** Accounts together with the Sessions and Verification services it is built from (both exported too). */
  static readonly layer = Layer.effect(
    Accounts,
    Effect.gen(function*() {
      const db = yield* Database
      const sessions = yield* Sessions
      const verification = yield* Verification
      const google = yield* GoogleIdentity
      const limiter = yield* RateLimiter
      const limits = yield* AuthRateLimits
      const hashing = yield* PasswordHashing
      // Verified against when there is no password to check, so a miss costs what a hit costs.
      const dummyHash = yield* Effect.cached(hashPassword("no account has this password", hashing))

      const userById = (userId: number) =>
        Effect.gen(function*() {
          const [row] = yield* queryAs(db, UserRow, `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [userId])
          if (!row) return yield* new NotFound({ message: "account not found" })
          return row
        })
      /** Tokens plus the user, the answer of every sign-in; the user row must exist. */
      const signedIn = (tokens: { token: string; refresh_token: string }, row: UserRow): AuthTokens => ({
        token: tokens.token,
        refresh_token: tokens.refresh_token,
        user: toUser(row),
      })
      /** Delivery after the commit: a failure is logged, the user can ask for a resend. */
      const deliverLater = <E>(what: string, userId: number, effect: Effect.Effect<void, E>) =>
        effect.pipe(
          Effect.catch((e) => Effect.logWarning(`registration ${what} could not be sent`, e).pipe(Effect.annotateLogs({ user_id: userId }))),
        )

      const register = Effect.fn("Accounts.register")(function*(body: RegisterBody, meta: RequestMeta) {
        yield* limiter.take(`auth:register:ip:${meta.ip}`, limits.registerPerIp)
        if (body.email === undefined && body.phone_number === undefined) {
          const message = "an email or a phone_number is required"
          return yield* new ValidationError({
            message,
            issues: [{ field: "email", code: "VALIDATION_ERROR", message }, { field: "phone_number", code: "VALIDATION_ERROR", message }],
          })
        }
        const email = body.email?.toLowerCase() ?? null
        const phone = body.phone_number !== undefined ? normalizeTzPhone(body.phone_number) : null
        // Checked before the costly hash; the unique constraints still decide under races.
        const [taken] = yield* db.query<{ email_taken: boolean; phone_taken: boolean }>(
          `SELECT bool_or(email = $1) AS email_taken, bool_or(phone_number = $2) AS phone_taken
             FROM users WHERE email = $1 OR phone_number = $2`,
          [email, phone],
        )
        if (taken?.email_taken) return yield* new Conflict({ message: "an account with this email already exists", field: "email" })
        if (taken?.phone_taken) return yield* new Conflict({ message: "an account with this phone number already exists", field: "phone_number" })
        const passwordHash = yield* hashPassword(body.password, hashing)
        const companyName = body.company_name?.trim() ? body.company_name.trim() : null
        const created = yield* db.transaction(Effect.gen(function*() {
          const [row] = yield* queryAs(
            db,
            UserRow,
            `INSERT INTO users (name, company_name, email, phone_number, password_hash)
             VALUES ($1, $2, $3, $4, $5) RETURNING ${USER_COLUMNS}`,
            [body.name.trim(), companyName, email, phone, passwordHash],
          )
          const tokens = yield* sessions.start(row!.id)
          const link = email ? Option.some(yield* verification.prepareEmail(row!.id, email)) : Option.none()
          const code = phone ? Option.some(yield* verification.prepareCode(row!.id, phone)) : Option.none()
          return { row: row!, tokens, link, code }
        })).pipe(Effect.catchTag("DbError", uniqueAsConflict("an account with this email or phone number already exists", "email")))
        if (Option.isSome(created.link)) yield* deliverLater("email", created.row.id, verification.deliverEmail(created.link.value))
        if (Option.isSome(created.code)) yield* deliverLater("SMS code", created.row.id, verification.deliverCode(created.code.value))
        return signedIn(created.tokens, created.row)
      })

      const login = Effect.fn("Accounts.login")(function*(body: LoginBody, meta: RequestMeta) {
        const identifier = parseIdentifier(body.identifier)
        if (Option.isNone(identifier)) {
          return yield* ValidationError.field("identifier", "Expected an email address or a Tanzanian phone number")
        }
        yield* limiter.take(`auth:login:ip:${meta.ip}`, limits.loginPerIp)
        yield* limiter.take(`auth:login:id:${identifier.value.value}`, limits.loginPerIdentifier)
        const [row] = yield* queryAs(
          db,
          UserWithPasswordRow,
          `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE ${identifier.value.column} = $1`,
          [identifier.value.value],
        )
        if (!row || row.password_hash === null) {
          yield* verifyPassword(body.password, yield* dummyHash)
          return yield* wrongCredentials()
        }
        if (!(yield* verifyPassword(body.password, row.password_hash))) return yield* wrongCredentials()
        // The owner got in: earlier tries were theirs, so they no longer count against the identifier.
        yield* limiter.reset(`auth:login:id:${identifier.value.value}`)
        if (row.disabled_at) return yield* disabled()
        if (needsRehash(row.password_hash, hashing)) {
          yield* db.query("UPDATE users SET password_hash = $2 WHERE id = $1", [row.id, yield* hashPassword(body.password, hashing)])
        }
        return signedIn(yield* sessions.start(row.id), row)
      })

      const googleSignIn = Effect.fn("Accounts.google")(function*(idToken: string, meta: RequestMeta) {
        yield* limiter.take(`auth:google:ip:${meta.ip}`, limits.googlePerIp)
        const profile = yield* google.verify(idToken)
        if (profile.email === null) {
          return yield* ValidationError.field("id_token", "the Google token carries no email address (request the email scope)")
        }
        const email = profile.email
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* db.transaction(Effect.gen(function*() {
          const [linked] = yield* queryAs(db, UserRow, `SELECT ${USER_COLUMNS} FROM users WHERE google_sub = $1`, [profile.sub])
          if (linked) return linked
          const [byEmail] = yield* queryAs(
            db,
            UserWithGoogleRow,
            `SELECT ${USER_COLUMNS}, google_sub FROM users WHERE email = $1 FOR UPDATE`,
            [email],
          )
          if (byEmail) {
            // Linking needs both sides to have proven the address; otherwise whoever registered it
            // first (perhaps not its owner) would share the account with the Google user.
            if (byEmail.google_sub !== null || !byEmail.email_verified || !profile.emailVerified) {
              return yield* new Conflict({
                message: "an account with this email already exists; sign in with its password (and verify the email) first",
                field: "email",
              })
            }
            yield* db.query("UPDATE users SET google_sub = $2, updated_at = $3 WHERE id = $1", [byEmail.id, profile.sub, now])
            return byEmail
          }
          const [created] = yield* queryAs(
            db,
            UserRow,
            `INSERT INTO users (name, email, email_verified, google_sub) VALUES ($1, $2, $3, $4) RETURNING ${USER_COLUMNS}`,
            [profile.name ?? email.split("@")[0]!, email, profile.emailVerified, profile.sub],
          )
          return created!
        })).pipe(Effect.catchTag("DbError", uniqueAsConflict("this Google account is being linked already; retry", "email")))
        if (row.disabled_at) return yield* disabled()
        return signedIn(yield* sessions.start(row.id), row)
      })

      const refresh = Effect.fn("Accounts.refresh")(function*(refreshToken: string, meta: RequestMeta) {
        yield* limiter.take(`auth:refresh:ip:${meta.ip}`, limits.refreshPerIp)
        const rotated = yield* sessions.rotate(refreshToken)
        const row = yield* userById(rotated.userId).pipe(Effect.catchTag("NotFound", () => Effect.fail(new Unauthorized({ message: "invalid or expired refresh token" }))))
        return signedIn(rotated, row)
      })

      const get = Effect.fn("Accounts.get")(function*(userId: number) {
        return toUser(yield* userById(userId))
      })

      const update = Effect.fn("Accounts.update")(function*(userId: number, patch: UpdateMeBody) {
        const sets: Array<string> = []
        const params: Array<unknown> = [userId]
        if (patch.name !== undefined) {
          params.push(patch.name.trim())
          sets.push(`name = $${params.length}`)
        }
        if (patch.company_name !== undefined) {
          params.push(patch.company_name?.trim() ? patch.company_name.trim() : null)
          sets.push(`company_name = $${params.length}`)
        }
        if (sets.length === 0) return yield* get(userId)
        params.push(new Date(yield* Clock.currentTimeMillis))
        const [row] = yield* queryAs(
          db,
          UserRow,
          `UPDATE users SET ${sets.join(", ")}, updated_at = $${params.length} WHERE id = $1 RETURNING ${USER_COLUMNS}`,
          params,
        )
        if (!row) return yield* new NotFound({ message: "account not found" })
        return toUser(row)
      })

      const setDisabled = Effect.fn("Accounts.setDisabled")(function*(userId: number, disable: boolean) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const [row] = yield* queryAs(
          db,
          UserRow,
          `UPDATE users SET disabled_at = CASE WHEN $2 THEN COALESCE(disabled_at, $3) ELSE NULL END, updated_at = $3
            WHERE id = $1 RETURNING ${USER_COLUMNS}`,
          [userId, disable, now],
        )
        if (!row) return yield* new NotFound({ message: `no account with id ${userId}` })
        return toUser(row)
      })

      const verifyIdentity = Effect.fn("Accounts.verifyIdentity")(function*(userId: number) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const [row] = yield* queryAs(
          db,
          UserRow,
          `UPDATE users SET email_verified = email_verified OR email IS NOT NULL,
                            phone_verified = phone_verified OR phone_number IS NOT NULL, updated_at = $2
            WHERE id = $1 RETURNING ${USER_COLUMNS}`,
          [userId, now],
        )
        if (!row) return yield* new NotFound({ message: `no account with id ${userId}` })
        return toUser(row)
      })

      return Accounts.of({ register, login, google: googleSignIn, refresh, get, update, setDisabled, verifyIdentity })
    }),
  ).pipe(Layer.provideMerge(Layer.mergeAll(Sessions.layer, Verification.layer)))
}
