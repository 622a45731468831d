/**
 * Test fixtures for accounts: a user row with chosen verification state, an access token and
 * an API key, created straight through the database so tests of other capabilities do not
 * depend on the registration flow.
 */
import { Effect } from "effect"
import { Authenticator } from "../../effects/auth/service.ts"
import { Database } from "../../effects/ports/Database.ts"
import { randomHexSync, sha256Hex } from "../../effects/shared/crypto.ts"
import type { TestApp } from "./app.ts"

export interface TestAccount {
  readonly userId: number
  /** JWT access token. */
  readonly token: string
  /** Plaintext API key (`MAIL_…`) with the given scopes. */
  readonly apiKey: string
  readonly apiKeyId: number
}

export interface AccountOptions {
  readonly emailVerified?: boolean
  readonly phoneVerified?: boolean
  readonly scopes?: string
  readonly email?: string
  readonly phone?: string
}

export const createAccount = (api: TestApp, options: AccountOptions = {}): Promise<TestAccount> =>
  api.run(Effect.gen(function*() {
    const db = yield* Database
    const auth = yield* Authenticator
    const suffix = randomHexSync(4)
    const [user] = yield* db.query<{ id: number }>(
      `INSERT INTO users (name, email, phone_number, email_verified, phone_verified)
       VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [
        `Test ${suffix}`,
        options.email ?? `user-${suffix}@example.co.tz`,
        options.phone ?? null,
        options.emailVerified ?? true,
        options.phoneVerified ?? false,
      ],
    )
    const key = `MAIL_${randomHexSync(32)}`
    const [row] = yield* db.query<{ id: number }>(
      "INSERT INTO api_keys (user_id, name, key_prefix, key_hash, scopes) VALUES ($1, 'test', $2, $3, $4) RETURNING id",
      [user!.id, key.slice(0, 12), yield* sha256Hex(key), options.scopes ?? "full"],
    )
    const { token } = yield* auth.issueAccessToken(user!.id)
    return { userId: user!.id, token, apiKey: key, apiKeyId: row!.id }
  }))
