/**
 * The AuthChanges port: how a process learns that a credential changed anywhere, so it may keep
 * principals in memory. Triggers on `api_keys` and `users` publish every change that matters to
 * authentication (revoked, expiry, scopes, owner, disabled, deleted) when its transaction
 * commits; each adapter (src/db/auth-changes.ts) delivers them to this process: in-process on
 * PGlite, through LISTEN/NOTIFY on PostgreSQL, where several instances share the database.
 */
import { Context, type Effect } from "effect"

export type AuthChange =
  /** A key row changed or went away (`api_keys.key_hash`). */
  | { readonly kind: "key"; readonly hash: string }
  /** An account changed (disabled, enabled, deleted): every key of it too. */
  | { readonly kind: "user"; readonly id: number }
  /** Changes may have been missed (the listener reconnected): forget everything. */
  | { readonly kind: "reset" }

export interface AuthChangesShape {
  /** Registers the one consumer (the principal cache); it gets this instance's own changes too. */
  readonly subscribe: (listener: (change: AuthChange) => void) => void
  /**
   * True while changes are known to arrive in time, so a cached principal may be trusted. False
   * while the listener is down or has not confirmed itself within its lease: callers then read
   * the database (fail safe).
   */
  readonly live: () => boolean
  /**
   * Resolves once every running instance has applied the changes committed before the call, or
   * can no longer trust its cache (its lease ran out). A revocation answers only after this, so
   * the very next request is refused wherever it lands.
   */
  readonly settle: Effect.Effect<void>
}

export class AuthChanges extends Context.Service<AuthChanges, AuthChangesShape>()("app/AuthChanges") {}
