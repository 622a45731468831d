/** Sandbox (SPEC.md "Sandbox"): credentials, SMTP settings, captured messages. Scope `sandbox`. */
import { Effect, Schema } from "effect"
import { SandboxCredentials } from "../../../effects/sandbox/credentials.ts"
import {
  CapturedMessage,
  ClearedCapturedMessages,
  CreatedSandboxCredential,
  CreateSandboxCredentialBody,
  SandboxCredential,
  SandboxSmtpSettings,
  SandboxUsage,
} from "../../../effects/sandbox/schema.ts"
import { Sandbox } from "../../../effects/sandbox/service.ts"
import { IdParams, PageQuery, paging } from "../../../effects/shared/schema.ts"
import { emlDownload, ok, route } from "../route.ts"

const common = { auth: "key", scope: "sandbox", tag: "Sandbox" } as const

const credentialRoutes = [
  route({
    ...common,
    method: "post",
    path: "/api/sandbox/credentials",
    summary: "Create a sandbox SMTP credential (the client_secret is returned only here)",
    description:
      "`scopes`: `full` (default) or a comma list of `smtp` (sign in and submit mail for capture) and `smtp:verify` (sign in only). " +
      "Use `client_id` as the SMTP username and `client_secret` as the password.",
    body: CreateSandboxCredentialBody,
    response: CreatedSandboxCredential,
    status: 201,
    handler: ({ body, principal }) => Effect.map(SandboxCredentials.use((c) => c.create(principal.userId, body)), (x) => ok(x)),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sandbox/credentials",
    summary: "List sandbox credentials (secrets masked), revoked ones included, newest first",
    response: Schema.Array(SandboxCredential),
    handler: ({ principal }) => Effect.map(SandboxCredentials.use((c) => c.list(principal.userId)), (x) => ok(x)),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sandbox/credentials/smtp",
    summary: "SMTP settings of the sandbox (the password only when newly generated)",
    description: "The first call creates the account's SMTP username and password and shows the password; later calls omit it.",
    response: SandboxSmtpSettings,
    handler: ({ principal }) => Effect.map(SandboxCredentials.use((c) => c.smtpSettings(principal.userId)), (x) => ok(x)),
  }),
  route({
    ...common,
    method: "post",
    path: "/api/sandbox/credentials/smtp/regenerate",
    summary: "New SMTP password, returned once; the old one stops working at once",
    response: SandboxSmtpSettings,
    handler: ({ principal }) =>
      Effect.map(SandboxCredentials.use((c) => c.regenerateSmtpPassword(principal.userId)), (x) => ok(x, { message: "password regenerated" })),
  }),
  route({
    ...common,
    method: "post",
    path: "/api/sandbox/credentials/:id/revoke",
    summary: "Revoke a sandbox credential (SMTP AUTH with it fails at once)",
    params: IdParams,
    response: SandboxCredential,
    handler: ({ params, principal }) =>
      Effect.map(SandboxCredentials.use((c) => c.revoke(principal.userId, params.id)), (x) => ok(x, { message: "credential revoked" })),
  }),
]

const messageRoutes = [
  route({
    ...common,
    method: "get",
    path: "/api/sandbox/messages",
    summary: "Captured messages, newest first",
    description: "Attachments are listed without `content`; GET /api/sandbox/messages/{id} returns it.",
    query: PageQuery,
    response: Schema.Array(CapturedMessage),
    handler: ({ query, principal }) => {
      const { page, perPage } = paging(query)
      return Effect.map(Sandbox.use((s) => s.list(principal.userId, { page, perPage })), (r) => ok(r.data, { pagination: r.pagination, more: r.more }))
    },
  }),
  route({
    ...common,
    method: "delete",
    path: "/api/sandbox/messages",
    summary: "Delete every captured message of the account",
    description: "Answers how many were deleted. The month's capture count is not given back.",
    response: ClearedCapturedMessages,
    handler: ({ principal }) =>
      Effect.map(Sandbox.use((s) => s.clear(principal.userId)), (n) => ok({ deleted_count: n }, { message: "captured messages deleted" })),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sandbox/messages/:id",
    summary: "One captured message with full bodies and base64 attachments",
    params: IdParams,
    response: CapturedMessage,
    handler: ({ params, principal }) => Effect.map(Sandbox.use((s) => s.get(principal.userId, params.id)), (x) => ok(x)),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sandbox/messages/:id/raw",
    summary: "A captured message exactly as submitted (message/rfc822)",
    params: IdParams,
    handler: ({ params, principal }) =>
      Effect.map(Sandbox.use((s) => s.raw(principal.userId, params.id)), (raw) => emlDownload(raw, `sandbox-${params.id}`)),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sandbox/usage",
    summary: "This month's captures against the allowance (2,000 per calendar month, UTC)",
    response: SandboxUsage,
    handler: ({ principal }) => Effect.map(Sandbox.use((s) => s.usage(principal.userId)), (x) => ok(x)),
  }),
]

export const sandboxRoutes = [...credentialRoutes, ...messageRoutes]
