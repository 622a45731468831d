/** The compliance profile and audit export (SPEC.md "Compliance"). */
import { Effect } from "effect"
import { AuditExport, ComplianceProfile, ComplianceProfilePatch } from "../../../effects/compliance/schema.ts"
import { Compliance } from "../../../effects/compliance/service.ts"
import { ok, route } from "../route.ts"

export const complianceRoutes = [
  route({
    method: "get",
    path: "/api/compliance/profile",
    auth: "key",
    scope: "compliance",
    tag: "Compliance",
    summary: "The account's data-protection profile (created with defaults on first read)",
    response: ComplianceProfile,
    handler: ({ principal }) => Compliance.use((c) => c.profile(principal.userId)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "patch",
    path: "/api/compliance/profile",
    auth: "key",
    scope: "compliance",
    tag: "Compliance",
    summary: "Update the profile",
    description: "default_retention_days applies to addresses created from now on (each message keeps its address's retention).",
    body: ComplianceProfilePatch,
    response: ComplianceProfile,
    handler: ({ body, principal }) => Compliance.use((c) => c.update(principal.userId, body)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "get",
    path: "/api/compliance/audit-export",
    auth: "key",
    scope: "compliance",
    tag: "Compliance",
    summary: "Summary of the account's own registration, retention and data counts",
    response: AuditExport,
    handler: ({ principal }) => Compliance.use((c) => c.auditExport(principal.userId)).pipe(Effect.map((x) => ok(x))),
  }),
]
