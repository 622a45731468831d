/**
 * Sign-in sessions: a 60-minute access JWT plus an opaque refresh token (30 days) that works
 * exactly once. Each refresh hands out a successor in the same family; presenting a token that
 * was already exchanged means two parties hold it (theft or a replay), so the whole family is
 * revoked and both must sign in again. Only SHA-256 of a refresh token is stored.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { Authenticator } from "../auth/service.ts"
import { AccountDisabled, Unauthorized } from "../errors.ts"
import { Database, type DbError, queryAs } from "../ports/Database.ts"
import { randomHex, sha256Hex } from "../shared/crypto.ts"

export const REFRESH_TOKEN_SECONDS = 30 * 24 * 3600
const REFRESH_TOKEN_PATTERN = /^rt_[0-9a-f]{64}$/

export interface SessionTokens {
  /** The access JWT. */
  readonly token: string
  readonly refresh_token: string
}

export interface SessionsShape {
  /** A new sign-in: an access token and the first refresh token of a new family. */
  readonly start: (userId: number) => Effect.Effect<SessionTokens, DbError>
  /** Exchanges a refresh token for a new pair; 401 when unknown, expired, revoked or re-used. */
  readonly rotate: (refreshToken: string) => Effect.Effect<SessionTokens & { readonly userId: number }, Unauthorized | AccountDisabled | DbError>
  /** Ends every session of the account. */
  readonly revokeAll: (userId: number) => Effect.Effect<void, DbError>
}

/** A refresh token as checked on rotation (decoded: a credential is never read through a cast). */
const RefreshTokenRow = Schema.Struct({
  id: Schema.Int,
  user_id: Schema.Int,
  family_id: Schema.String,
  expires_at: Schema.Date,
  rotated_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date),
})
const DisabledRow = Schema.Struct({ disabled_at: Schema.NullOr(Schema.Date) })

type Rotation =
  | { readonly _tag: "Rotated"; readonly userId: number; readonly refreshToken: string }
  | { readonly _tag: "Invalid" }
  | { readonly _tag: "Reused"; readonly userId: number }
  | { readonly _tag: "Disabled" }

export class Sessions extends Context.Service<Sessions, SessionsShape>()("app/Sessions") {
  static readonly layer = Layer.effect(
    Sessions,
    Effect.gen(function*() {
      const db = yield* Database
      const auth = yield* Authenticator

      /** Stores a fresh refresh token of `familyId` and returns its plaintext. */
      const mint = (userId: number, familyId: string, now: number) =>
        Effect.gen(function*() {
          const refreshToken = `rt_${yield* randomHex(32)}`
          yield* db.query(
            "INSERT INTO refresh_tokens (user_id, family_id, token_hash, expires_at) VALUES ($1, $2, $3, $4)",
            [userId, familyId, yield* sha256Hex(refreshToken), new Date(now + REFRESH_TOKEN_SECONDS * 1000)],
          )
          return refreshToken
        })

      const start = Effect.fn("Sessions.start")(function*(userId: number) {
        const now = yield* Clock.currentTimeMillis
        const refreshToken = yield* mint(userId, yield* randomHex(16), now)
        const { token } = yield* auth.issueAccessToken(userId)
        return { token, refresh_token: refreshToken }
      })

      const rotate = Effect.fn("Sessions.rotate")(function*(refreshToken: string) {
        const invalid = new Unauthorized({ message: "invalid or expired refresh token" })
        if (!REFRESH_TOKEN_PATTERN.test(refreshToken)) return yield* invalid
        const hash = yield* sha256Hex(refreshToken)
        const now = yield* Clock.currentTimeMillis
        const outcome: Rotation = yield* db.transaction(Effect.gen(function*() {
          const [row] = yield* queryAs(
            db,
            RefreshTokenRow,
            "SELECT id, user_id, family_id, expires_at, rotated_at, revoked_at FROM refresh_tokens WHERE token_hash = $1 FOR UPDATE",
            [hash],
          )
          if (!row || row.revoked_at) return { _tag: "Invalid" } as const
          if (row.rotated_at) {
            yield* db.query("UPDATE refresh_tokens SET revoked_at = $2 WHERE family_id = $1 AND revoked_at IS NULL", [row.family_id, new Date(now)])
            return { _tag: "Reused", userId: row.user_id } as const
          }
          if (row.expires_at.getTime() <= now) return { _tag: "Invalid" } as const
          const [user] = yield* queryAs(db, DisabledRow, "SELECT disabled_at FROM users WHERE id = $1", [row.user_id])
          if (!user) return { _tag: "Invalid" } as const
          // A disabled account keeps its sessions (an operator may enable it again) but gets no new tokens.
          if (user.disabled_at) return { _tag: "Disabled" } as const
          yield* db.query("UPDATE refresh_tokens SET rotated_at = $2 WHERE id = $1", [row.id, new Date(now)])
          return { _tag: "Rotated", userId: row.user_id, refreshToken: yield* mint(row.user_id, row.family_id, now) } as const
        }))
        switch (outcome._tag) {
          case "Invalid":
            return yield* invalid
          case "Disabled":
            return yield* new AccountDisabled({ message: "this account is disabled" })
          case "Reused":
            // The revocation is committed before answering: failing inside the transaction would undo it.
            yield* Effect.logWarning("refresh token re-used; its family is revoked").pipe(Effect.annotateLogs({ user_id: outcome.userId }))
            return yield* invalid
          case "Rotated": {
            const { token } = yield* auth.issueAccessToken(outcome.userId)
            return { userId: outcome.userId, token, refresh_token: outcome.refreshToken }
          }
        }
      })

      const revokeAll = Effect.fn("Sessions.revokeAll")(function*(userId: number) {
        const now = yield* Clock.currentTimeMillis
        yield* db.query("UPDATE refresh_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL", [userId, new Date(now)])
      })

      return Sessions.of({ start, rotate, revokeAll })
    }),
  )
}
