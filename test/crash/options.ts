/**
 * Settings of the crash trials. The defaults are the bounded CI run (20 kills, about 1.5 minutes
 * on a quiet 2-core machine); CRASH_* environment variables make longer or different runs
 * (README "Crash trials"). Kept apart from trials.ts so the PGlite pass, which skips the trials,
 * loads nothing heavy.
 */
export interface CrashOptions {
  /** postgres:// URL of a server and a database to connect to for CREATE/DROP DATABASE. */
  readonly adminUrl: string
  readonly seed: number
  readonly kills: number
  /** How long the service runs under load before a kill: uniform in [minUpMs, maxUpMs] after ready. */
  readonly minUpMs: number
  readonly maxUpMs: number
  /** Share of trials that kill during start-up instead (after earlyMinMs..earlyMaxMs from spawn). */
  readonly earlyKillRate: number
  readonly earlyMinMs: number
  readonly earlyMaxMs: number
  /** Share of restarts before which the dead process's leases are expired. */
  readonly expireLeasesRate: number
  readonly accounts: number
  readonly inboundSessions: number
  readonly inboundPauseMs: number
  readonly outboundPauseMs: number
  readonly topupPauseMs: number
  /** Share of webhook requests the receiver answers 500/503/reset. */
  readonly receiverFailureRate: number
  /** Relay, gateway and receiver answer after up to this many ms, so kills land mid-call. */
  readonly latencyMs: number
  readonly webhookMaxAttempts: number
  readonly drainTimeoutMs: number
  /** Keep the database (and print its URL) instead of dropping it. */
  readonly keepDatabase: boolean
}

export const DEFAULT_SEED = 20261121

const int = (env: NodeJS.ProcessEnv, name: string, fallback: number) => {
  const raw = env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`)
  return value
}

/** The bounded CI run by default; CRASH_* variables make longer ones (README "Crash trials"). */
export const crashOptionsFromEnv = (adminUrl: string, env: NodeJS.ProcessEnv = process.env): CrashOptions => ({
  adminUrl,
  seed: int(env, "CRASH_SEED", DEFAULT_SEED),
  kills: Math.max(1, int(env, "CRASH_KILLS", 20)),
  minUpMs: int(env, "CRASH_MIN_UP_MS", 800),
  maxUpMs: int(env, "CRASH_MAX_UP_MS", 4500),
  earlyKillRate: int(env, "CRASH_EARLY_KILL_RATE", 0.15),
  earlyMinMs: int(env, "CRASH_EARLY_MIN_MS", 300),
  earlyMaxMs: int(env, "CRASH_EARLY_MAX_MS", 2000),
  expireLeasesRate: int(env, "CRASH_EXPIRE_LEASES_RATE", 0.5),
  accounts: Math.max(1, int(env, "CRASH_ACCOUNTS", 3)),
  inboundSessions: int(env, "CRASH_INBOUND_SESSIONS", 3),
  inboundPauseMs: int(env, "CRASH_INBOUND_PAUSE_MS", 60),
  outboundPauseMs: int(env, "CRASH_OUTBOUND_PAUSE_MS", 350),
  topupPauseMs: int(env, "CRASH_TOPUP_PAUSE_MS", 400),
  receiverFailureRate: int(env, "CRASH_RECEIVER_FAILURE_RATE", 0.35),
  latencyMs: int(env, "CRASH_LATENCY_MS", 200),
  webhookMaxAttempts: Math.max(1, int(env, "CRASH_WEBHOOK_MAX_ATTEMPTS", 3)),
  drainTimeoutMs: int(env, "CRASH_DRAIN_TIMEOUT_MS", 90_000),
  keepDatabase: env.CRASH_KEEP_DB === "1",
})
