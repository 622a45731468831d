/**
 * Proving an email address or a phone number. Email: a signed link (HS256 token whose `jti` is
 * stored hashed) that works once within 24 h. Phone: a 6-digit code stored as a keyed HMAC,
 * valid 10 minutes, 5 tries. A newer link or code replaces older ones of the account.
 *
 * The address or number being proven becomes the account's only when the proof arrives, so an
 * email or phone change never leaves the account pointing at something unverified, and a
 * unique violation at that moment (someone else got there first) answers 409.
 *
 * Writing a link or code and delivering it are separate steps: registration writes inside its
 * transaction and delivers after the commit, so no mail leaves for an account that was not created.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { signJwt, verifyJwt } from "../auth/jwt.ts"
import { AppConfig } from "../config.ts"
import { Conflict, type NotConfigured, type ProviderError, type RateLimited, ValidationError } from "../errors.ts"
import { Database, type DbError, isUniqueViolation } from "../ports/Database.ts"
import { PlatformMailer } from "../ports/PlatformMailer.ts"
import { SmsGateway } from "../ports/SmsGateway.ts"
import { RateLimiter } from "../ratelimit/service.ts"
import { hmacSha256Hex, randomHex, sha256Hex, timingSafeEqual } from "../shared/crypto.ts"
import { normalizeTzPhone } from "../shared/schema.ts"
import { AuthRateLimits } from "./limits.ts"

export const EMAIL_TOKEN_SECONDS = 24 * 3600
export const OTP_SECONDS = 10 * 60
export const OTP_MAX_ATTEMPTS = 5
const EMAIL_TOKEN_TYPE = "email_verify"

export interface PreparedEmail {
  readonly email: string
  readonly link: string
  readonly expiresAt: Date
}

export interface PreparedCode {
  readonly phoneNumber: string
  readonly code: string
  readonly expiresAt: Date
}

export interface VerificationShape {
  /** Records a new link for `email` (older ones of the account stop working); sends nothing. */
  readonly prepareEmail: (userId: number, email: string) => Effect.Effect<PreparedEmail, DbError>
  readonly deliverEmail: (prepared: PreparedEmail) => Effect.Effect<void, ProviderError>
  /** Records a new code for `phoneNumber` (older ones stop working); sends nothing. */
  readonly prepareCode: (userId: number, phoneNumber: string) => Effect.Effect<PreparedCode, DbError>
  readonly deliverCode: (prepared: PreparedCode) => Effect.Effect<void, ProviderError | NotConfigured>

  /** POST /api/auth/email: a link to a new address (409 if another account has it); any case. */
  readonly startEmailChange: (userId: number, email: string) => Effect.Effect<PreparedEmail, Conflict | RateLimited | ProviderError | DbError>
  /** POST /api/auth/email/resend: a fresh link to the address awaiting verification. */
  readonly resendEmail: (userId: number) => Effect.Effect<PreparedEmail, ValidationError | Conflict | RateLimited | ProviderError | DbError>
  /** POST /api/auth/email/verify: consumes the link's token; the address becomes the account's, verified. */
  readonly verifyEmail: (token: string, ip: string) => Effect.Effect<{ readonly userId: number; readonly email: string }, ValidationError | Conflict | RateLimited | DbError>

  /** POST /api/auth/phone: a code to a new number (409 if another account has it); `0…` or `+255…`. */
  readonly startPhoneChange: (userId: number, phoneNumber: string) => Effect.Effect<PreparedCode, Conflict | RateLimited | ProviderError | NotConfigured | DbError>
  readonly resendCode: (userId: number) => Effect.Effect<PreparedCode, ValidationError | Conflict | RateLimited | ProviderError | NotConfigured | DbError>
  /** POST /api/auth/phone/verify: checks the latest code; the number becomes the account's, verified. */
  readonly verifyPhone: (userId: number, code: string) => Effect.Effect<void, ValidationError | Conflict | RateLimited | DbError>
}

/** A uniformly random 6-digit code (rejection sampling avoids modulo bias). */
const sixDigits = (): string => {
  const limit = Math.floor(0x1_0000_0000 / 1_000_000) * 1_000_000
  const buf = new Uint32Array(1)
  do crypto.getRandomValues(buf); while (buf[0]! >= limit)
  return String(buf[0]! % 1_000_000).padStart(6, "0")
}

interface Contacts {
  readonly email: string | null
  readonly email_verified: boolean
  readonly phone_number: string | null
  readonly phone_verified: boolean
}

type CodeCheck =
  | { readonly _tag: "Verified"; readonly phoneNumber: string }
  | { readonly _tag: "Rejected"; readonly reason: string }

export class Verification extends Context.Service<Verification, VerificationShape>()("app/Verification") {
  static readonly layer = Layer.effect(
    Verification,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const mailer = yield* PlatformMailer
      const sms = yield* SmsGateway
      const limiter = yield* RateLimiter
      const limits = yield* AuthRateLimits

      const nowMs = Clock.currentTimeMillis
      const codeHash = (userId: number, phoneNumber: string, code: string) =>
        hmacSha256Hex(config.jwtSecret, `otp:${userId}:${phoneNumber}:${code}`)
      /** Every link or code sent counts against the account and the destination. */
      const limitSends = (userId: number, destination: string) =>
        Effect.andThen(
          limiter.take(`auth:send:account:${userId}`, limits.sendsPerAccount),
          limiter.take(`auth:send:to:${destination}`, limits.sendsPerDestination),
        )
      const toConflict = (field: string, message: string) => (e: DbError): Effect.Effect<never, Conflict | DbError> =>
        isUniqueViolation(e) ? Effect.fail(new Conflict({ message, field })) : Effect.fail(e)

      const prepareEmail = Effect.fn("Verification.prepareEmail")(function*(userId: number, email: string) {
        const now = yield* nowMs
        const iat = Math.floor(now / 1000)
        const jti = yield* randomHex(16)
        const token = yield* signJwt(config.jwtSecret, { sub: String(userId), typ: EMAIL_TOKEN_TYPE, jti, iat, exp: iat + EMAIL_TOKEN_SECONDS })
        const expiresAt = new Date((iat + EMAIL_TOKEN_SECONDS) * 1000)
        yield* db.transaction(Effect.gen(function*() {
          yield* db.query("DELETE FROM email_verifications WHERE user_id = $1 AND used_at IS NULL", [userId])
          yield* db.query(
            "INSERT INTO email_verifications (user_id, email, token_hash, expires_at) VALUES ($1, $2, $3, $4)",
            [userId, email, yield* sha256Hex(jti), expiresAt],
          )
        }))
        return { email, link: `${config.baseUrl}/verify-email?token=${encodeURIComponent(token)}`, expiresAt }
      })

      const deliverEmail = Effect.fn("Verification.deliverEmail")(function*(prepared: PreparedEmail) {
        yield* mailer.send({
          to: prepared.email,
          subject: "Verify your email address",
          text: [
            "Confirm this email address for your account by opening the link below.",
            "The link works once and expires in 24 hours.",
            "",
            prepared.link,
            "",
            "If you did not ask for this, ignore this message.",
          ].join("\n"),
        })
      })

      const prepareCode = Effect.fn("Verification.prepareCode")(function*(userId: number, phoneNumber: string) {
        const now = yield* nowMs
        const code = sixDigits()
        const expiresAt = new Date(now + OTP_SECONDS * 1000)
        yield* db.transaction(Effect.gen(function*() {
          yield* db.query("DELETE FROM phone_verifications WHERE user_id = $1 AND used_at IS NULL", [userId])
          yield* db.query(
            "INSERT INTO phone_verifications (user_id, phone_number, code_hash, expires_at) VALUES ($1, $2, $3, $4)",
            [userId, phoneNumber, yield* codeHash(userId, phoneNumber, code), expiresAt],
          )
        }))
        return { phoneNumber, code, expiresAt }
      })

      const deliverCode = Effect.fn("Verification.deliverCode")(function*(prepared: PreparedCode) {
        yield* sms.send({ to: prepared.phoneNumber, message: `Your verification code is ${prepared.code}. It expires in 10 minutes.` })
      })

      const accountContacts = (userId: number) =>
        Effect.map(
          db.query<Contacts>("SELECT email, email_verified, phone_number, phone_verified FROM users WHERE id = $1", [userId]),
          (rows) => rows[0],
        )

      /**
       * Email and phone go through the same steps; a channel names what differs. `column` is
       * both the users column and the pending proof's column in `table`.
       */
      const channel = <P, E>(c: {
        readonly column: "email" | "phone_number"
        readonly noun: string
        readonly table: string
        readonly verified: (me: Contacts) => boolean
        /** The 400 when the account has nothing to prove. */
        readonly nothing: string
        readonly prepare: (userId: number, target: string) => Effect.Effect<P, DbError>
        readonly deliver: (prepared: P) => Effect.Effect<void, E>
      }) => {
        const alreadyVerified = new Conflict({ message: `this ${c.noun} is already verified`, field: c.column })
        const send = (userId: number, target: string) =>
          Effect.gen(function*() {
            yield* limitSends(userId, target)
            const prepared = yield* c.prepare(userId, target)
            yield* c.deliver(prepared)
            return prepared
          })
        /** A proof for a new email or number: 409 if another account has it or it is already this one's, verified. */
        const start = (userId: number, target: string) =>
          Effect.gen(function*() {
            const taken = yield* db.query(`SELECT 1 FROM users WHERE ${c.column} = $1 AND id <> $2`, [target, userId])
            if (taken.length > 0) return yield* new Conflict({ message: `this ${c.noun} belongs to another account`, field: c.column })
            const me = yield* accountContacts(userId)
            if (me?.[c.column] === target && c.verified(me)) return yield* alreadyVerified
            return yield* send(userId, target)
          })
        /** A fresh proof for what awaits one: a change in progress, else the account's own unverified one. */
        const resend = (userId: number) =>
          Effect.gen(function*() {
            const [pending] = yield* db.query<{ target: string }>(
              `SELECT ${c.column} AS target FROM ${c.table} WHERE user_id = $1 AND used_at IS NULL ORDER BY id DESC LIMIT 1`,
              [userId],
            )
            const me = yield* accountContacts(userId)
            const own = me?.[c.column]
            const target = pending?.target ?? (me && own && !c.verified(me) ? own : undefined)
            if (target === undefined) return yield* own ? alreadyVerified : ValidationError.field(c.column, c.nothing)
            return yield* send(userId, target)
          })
        return { start, resend }
      }

      const email = channel({
        column: "email",
        noun: "email",
        table: "email_verifications",
        verified: (me) => me.email_verified,
        nothing: "this account has no email address; add one with POST /api/auth/email",
        prepare: prepareEmail,
        deliver: deliverEmail,
      })
      const phone = channel({
        column: "phone_number",
        noun: "phone number",
        table: "phone_verifications",
        verified: (me) => me.phone_verified,
        nothing: "this account has no phone number; add one with POST /api/auth/phone",
        prepare: prepareCode,
        deliver: deliverCode,
      })

      const startEmailChange = Effect.fn("Verification.startEmailChange")((userId: number, address: string) =>
        email.start(userId, address.toLowerCase())
      )
      const resendEmail = Effect.fn("Verification.resendEmail")((userId: number) => email.resend(userId))
      const startPhoneChange = Effect.fn("Verification.startPhoneChange")((userId: number, number: string) =>
        phone.start(userId, normalizeTzPhone(number))
      )
      const resendCode = Effect.fn("Verification.resendCode")((userId: number) => phone.resend(userId))

      const verifyEmail = Effect.fn("Verification.verifyEmail")(function*(token: string, ip: string) {
        yield* limiter.take(`auth:email-verify:ip:${ip}`, limits.emailVerifyPerIp)
        const now = yield* nowMs
        const invalid = ValidationError.field("token", "invalid or expired verification token")
        const claims = yield* verifyJwt(config.jwtSecret, token, Math.floor(now / 1000))
        if (Option.isNone(claims) || claims.value.typ !== EMAIL_TOKEN_TYPE || typeof claims.value.jti !== "string") return yield* invalid
        const userId = Number(claims.value.sub)
        const hash = yield* sha256Hex(claims.value.jti)
        const outcome = yield* db.transaction(Effect.gen(function*() {
          const [row] = yield* db.query<{ id: number; user_id: number; email: string; expires_at: Date; used_at: Date | null }>(
            "SELECT id, user_id, email, expires_at, used_at FROM email_verifications WHERE token_hash = $1 FOR UPDATE",
            [hash],
          )
          if (!row || row.user_id !== userId || row.expires_at.getTime() <= now) return Option.none<string>()
          if (row.used_at) return Option.some("")
          yield* db.query("UPDATE email_verifications SET used_at = $2 WHERE id = $1", [row.id, new Date(now)])
          yield* db.query(
            "UPDATE users SET email = $2, email_verified = true, updated_at = $3 WHERE id = $1",
            [userId, row.email, new Date(now)],
          )
          return Option.some(row.email)
        })).pipe(Effect.catchTag("DbError", toConflict("email", "this email now belongs to another account")))
        if (Option.isNone(outcome)) return yield* invalid
        if (outcome.value === "") return yield* ValidationError.field("token", "this verification link was already used")
        return { userId, email: outcome.value }
      })

      const verifyPhone = Effect.fn("Verification.verifyPhone")(function*(userId: number, code: string) {
        yield* limiter.take(`auth:phone-verify:account:${userId}`, limits.phoneVerifyPerAccount)
        const now = yield* nowMs
        // Wrong tries are counted in the transaction and committed; the 400 is raised after it.
        const outcome: CodeCheck = yield* db.transaction(Effect.gen(function*() {
          const [row] = yield* db.query<{ id: number; phone_number: string; code_hash: string; attempts: number; expires_at: Date }>(
            `SELECT id, phone_number, code_hash, attempts, expires_at FROM phone_verifications
              WHERE user_id = $1 AND used_at IS NULL ORDER BY id DESC LIMIT 1 FOR UPDATE`,
            [userId],
          )
          if (!row) return { _tag: "Rejected", reason: "no verification code is pending; request one first" } as const
          if (row.expires_at.getTime() <= now) return { _tag: "Rejected", reason: "this code has expired; request a new one" } as const
          if (row.attempts >= OTP_MAX_ATTEMPTS) {
            return { _tag: "Rejected", reason: "too many wrong attempts; request a new code" } as const
          }
          if (!timingSafeEqual(yield* codeHash(userId, row.phone_number, code), row.code_hash)) {
            yield* db.query("UPDATE phone_verifications SET attempts = attempts + 1 WHERE id = $1", [row.id])
            const left = OTP_MAX_ATTEMPTS - row.attempts - 1
            return { _tag: "Rejected", reason: left > 0 ? `incorrect code; ${left} tries left` : "incorrect code; request a new one" } as const
          }
          yield* db.query("UPDATE phone_verifications SET used_at = $2 WHERE id = $1", [row.id, new Date(now)])
          yield* db.query(
            "UPDATE users SET phone_number = $2, phone_verified = true, updated_at = $3 WHERE id = $1",
            [userId, row.phone_number, new Date(now)],
          )
          return { _tag: "Verified", phoneNumber: row.phone_number } as const
        })).pipe(Effect.catchTag("DbError", toConflict("phone_number", "this phone number now belongs to another account")))
        if (outcome._tag === "Rejected") return yield* ValidationError.field("code", outcome.reason)
      })

      return Verification.of({
        prepareEmail,
        deliverEmail,
        prepareCode,
        deliverCode,
        startEmailChange,
        resendEmail,
        verifyEmail,
        startPhoneChange,
        resendCode,
        verifyPhone,
      })
    }),
  )
}
