/**
 * Outbound email (SPEC.md "Outbound email"): decode, call the Outbound service, answer with the
 * caller's rate-limit bucket in `RateLimit-*` headers. Scopes `outbound:send` / `outbound:read`.
 */
import { Effect, Schema } from "effect"
import { idempotencyKey } from "../../../effects/outbound/idempotency.ts"
import {
  BatchEmailBody,
  BatchResult,
  OutboundMessage,
  OutboundMessageDetail,
  SendEmailBody,
  Suppression,
} from "../../../effects/outbound/schema.ts"
import { Outbound, type Sent } from "../../../effects/outbound/service.ts"
import { IdParams, PageQuery, Text } from "../../../effects/shared/schema.ts"
import { emlDownload, ok, okFrom, paged, route } from "../route.ts"

const tag = "Outbound email"

const sentHeaders = (sent: Sent<unknown>): Record<string, string> => ({
  ...(sent.rateLimit
    ? {
      "RateLimit-Limit": String(sent.rateLimit.limit),
      "RateLimit-Remaining": String(sent.rateLimit.remaining),
      "RateLimit-Reset": String(sent.rateLimit.resetSeconds),
    }
    : {}),
  ...(sent.replayed ? { "Idempotent-Replayed": "true" } : {}),
})

const sendDescription = [
  "Recipients: `addr@domain` or `Name <addr@domain>`; at most 50 across to, cc and bcc. Costs 5 TZS per recipient,",
  "debited before dispatch; suppressed recipients are dropped first and not charged. Answers after the provider",
  "answered: 201 with `status: sent` (recipients the provider refused are `failed` in GET /emails/{id} and refunded),",
  "or 502 PROVIDER_ERROR when the provider failed as a whole (fully refunded). Attachments: at most 10, each 10 MiB,",
  "20 MiB together. `template_id` + `variables` render `{{key}}`; inline fields override the template's.",
  "An optional `Idempotency-Key` header makes a retry with the same body within 24 h return the first answer.",
].join(" ")

export const outboundRoutes = [
  route({
    method: "post",
    path: "/api/outbound/emails",
    auth: "key",
    scope: "outbound:send",
    tag,
    summary: "Send an email",
    description: sendDescription,
    body: SendEmailBody,
    response: OutboundMessage,
    status: 201,
    handler: ({ body, principal, header }) =>
      Effect.gen(function*() {
        const key = yield* idempotencyKey(header("idempotency-key"), "POST /api/outbound/emails", body)
        const sent = yield* Outbound.use((o) => o.send(principal.userId, body, key))
        return ok(sent.data, { headers: sentHeaders(sent) })
      }),
  }),
  route({
    method: "post",
    path: "/api/outbound/emails/batch",
    auth: "key",
    scope: "outbound:send",
    tag,
    summary: "Send one message per recipient",
    description: [
      "Every recipient of `to` gets a message of their own (no cc/bcc; nobody sees the others). At most 1000",
      "recipients; duplicates are sent once, suppressed ones are left out. The whole cost is checked up front:",
      "402 sends nothing. Messages go to the provider in chunks of 50. Counts as one call for the rate limit.",
    ].join(" "),
    body: BatchEmailBody,
    response: BatchResult,
    status: 201,
    handler: ({ body, principal, header }) =>
      Effect.gen(function*() {
        const key = yield* idempotencyKey(header("idempotency-key"), "POST /api/outbound/emails/batch", body)
        const sent = yield* Outbound.use((o) => o.sendBatch(principal.userId, body, key))
        return ok(sent.data, { headers: sentHeaders(sent) })
      }),
  }),
  route({
    method: "get",
    path: "/api/outbound/emails",
    auth: "key",
    scope: "outbound:read",
    tag,
    summary: "Sent messages, newest first",
    query: PageQuery,
    response: Schema.Array(OutboundMessage),
    handler: ({ query, principal }) =>
      paged(query, (page) => Outbound.use((o) => o.list(principal.userId, page))),
  }),
  route({
    method: "get",
    path: "/api/outbound/emails/:id",
    auth: "key",
    scope: "outbound:read",
    tag,
    summary: "One message with the status of each recipient",
    params: IdParams,
    response: OutboundMessageDetail,
    handler: ({ params, principal }) => okFrom(Outbound.use((o) => o.get(principal.userId, params.id))),
  }),
  route({
    method: "get",
    path: "/api/outbound/emails/:id/raw",
    auth: "key",
    scope: "outbound:read",
    tag,
    summary: "The message as the local capture transport kept it (message/rfc822)",
    description: "Only while SMTP_RELAY_URL is unset (the embedded default): what would have been sent, DKIM signature included. 404 for mail handed to a relay.",
    params: IdParams,
    handler: ({ params, principal }) =>
      Effect.map(Outbound.use((o) => o.captured(principal.userId, params.id)), (raw) => emlDownload(raw, `outbound-${params.id}`)),
  }),
  route({
    method: "get",
    path: "/api/outbound/suppressions",
    auth: "key",
    scope: "outbound:read",
    tag,
    summary: "Addresses sends skip: those the provider refused permanently (5xx)",
    query: PageQuery,
    response: Schema.Array(Suppression),
    handler: ({ query, principal }) =>
      paged(query, (page) => Outbound.use((o) => o.suppressions(principal.userId, page))),
  }),
  route({
    method: "delete",
    path: "/api/outbound/suppressions/:email",
    auth: "key",
    scope: "outbound:send",
    tag,
    summary: "Take an address off the suppression list",
    params: Schema.Struct({ email: Text }),
    response: Schema.Struct({ deleted_suppression: Schema.String }),
    handler: ({ params, principal }) =>
      Effect.as(Outbound.use((o) => o.unsuppress(principal.userId, params.email)), ok({ deleted_suppression: params.email.trim().toLowerCase() })),
  }),
]
