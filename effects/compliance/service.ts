/**
 * The account's data-protection profile (PDPC registration, retention) and its audit export.
 * A default profile is created the first time it is read; `default_retention_days` is copied
 * onto each address at creation and from there onto each message it receives.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Database, type DbError } from "../ports/Database.ts"
import {
  type AuditExport,
  type ComplianceProfile,
  type ComplianceProfilePatch,
  type ComplianceProfileRow,
  toComplianceProfile,
} from "./schema.ts"

/** Days a message is kept when the account never chose (SPEC.md "Limits"). */
export const DEFAULT_RETENTION_DAYS = 30

export interface ComplianceShape {
  /** The profile, created with defaults on first read. */
  readonly profile: (userId: number) => Effect.Effect<ComplianceProfile, DbError>
  /** Applies the given fields; omitted fields stay as they are. */
  readonly update: (userId: number, patch: ComplianceProfilePatch) => Effect.Effect<ComplianceProfile, DbError>
  /** Retention for new addresses, without creating a profile. */
  readonly retentionDays: (userId: number) => Effect.Effect<number, DbError>
  /** The account's own numbers only. */
  readonly auditExport: (userId: number) => Effect.Effect<AuditExport, DbError>
}

const COLUMNS = {
  pdpc_registered: "pdpc_registered",
  pdpc_certificate_number: "pdpc_certificate_number",
  pdpc_registered_at: "pdpc_registered_at",
  default_retention_days: "default_retention_days",
  data_consent_at: "data_consent_at",
  privacy_policy_version: "privacy_policy_version",
} as const satisfies Record<keyof ComplianceProfilePatch, string>

export class Compliance extends Context.Service<Compliance, ComplianceShape>()("app/Compliance") {
  static readonly layer = Layer.effect(
    Compliance,
    Effect.gen(function*() {
      const db = yield* Database

      const ensureRow = (userId: number) =>
        Effect.gen(function*() {
          const found = yield* db.query<ComplianceProfileRow>("SELECT * FROM compliance_profiles WHERE user_id = $1", [userId])
          if (found[0]) return found[0]
          yield* db.query("INSERT INTO compliance_profiles (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING", [userId])
          const [row] = yield* db.query<ComplianceProfileRow>("SELECT * FROM compliance_profiles WHERE user_id = $1", [userId])
          return row!
        })

      const profile = Effect.fn("Compliance.profile")(function*(userId: number) {
        return toComplianceProfile(yield* ensureRow(userId))
      })

      const update = Effect.fn("Compliance.update")(function*(userId: number, patch: ComplianceProfilePatch) {
        yield* ensureRow(userId)
        const sets: Array<string> = []
        const params: Array<unknown> = [userId]
        for (const [key, column] of Object.entries(COLUMNS) as Array<[keyof ComplianceProfilePatch, string]>) {
          const value = patch[key]
          if (value === undefined) continue
          params.push(key === "data_consent_at" && value !== null ? new Date(value as string) : value)
          sets.push(`${column} = $${params.length}`)
        }
        const now = new Date(yield* Clock.currentTimeMillis)
        params.push(now)
        sets.push(`updated_at = $${params.length}`)
        const [row] = yield* db.query<ComplianceProfileRow>(
          `UPDATE compliance_profiles SET ${sets.join(", ")} WHERE user_id = $1 RETURNING *`,
          params,
        )
        return toComplianceProfile(row!)
      })

      const retentionDays = (userId: number) =>
        db.query<{ d: number }>("SELECT default_retention_days AS d FROM compliance_profiles WHERE user_id = $1", [userId]).pipe(
          Effect.map((rows) => rows[0]?.d ?? DEFAULT_RETENTION_DAYS),
        )

      const auditExport = Effect.fn("Compliance.auditExport")(function*(userId: number) {
        const p = yield* profile(userId)
        // The caller's rows only. Messages are summed from the per-address counters that ingest,
        // retention and deletion keep in step: at most 100 rows read instead of counting millions.
        const [counts] = yield* db.query<{ addresses: number; messages: number }>(
          "SELECT count(*)::int8 AS addresses, COALESCE(sum(message_count), 0)::int8 AS messages FROM inbound_addresses WHERE user_id = $1",
          [userId],
        )
        return {
          account_id: userId,
          pdpc_registered: p.pdpc_registered,
          pdpc_certificate_number: p.pdpc_certificate_number,
          pdpc_registered_at: p.pdpc_registered_at,
          default_retention_days: p.default_retention_days,
          address_count: counts?.addresses ?? 0,
          message_count: counts?.messages ?? 0,
          generated_at: new Date(yield* Clock.currentTimeMillis).toISOString(),
        } satisfies AuditExport
      })

      return Compliance.of({ profile, update, retentionDays, auditExport })
    }),
  )
}
