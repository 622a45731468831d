/** AI auto-reply (SPEC.md "AI auto-reply"): decode, call the service, answer. Scope `agent`. */
import { Effect, Schema } from "effect"
import { AddressIdParams, AgentConfig, AgentDraft, AgentJob, DraftBody, MAX_PERSONA_CHARS, PutAgentConfigBody } from "../../../effects/agent/schema.ts"
import { AgentConfigs } from "../../../effects/agent/service.ts"
import { IdFromString, PageQuery } from "../../../effects/shared/schema.ts"
import { ok, okFrom, paged, route } from "../route.ts"

const common = { auth: "key", scope: "agent", tag: "AI auto-reply" } as const

const AddressPageQuery = Schema.Struct({ address_id: IdFromString, ...PageQuery.fields })

export const agentRoutes = [
  route({
    ...common,
    method: "get",
    path: "/api/agent/configs",
    summary: "The account's stored agent configs (addresses without one run with the defaults: mode off)",
    response: Schema.Array(AgentConfig),
    handler: ({ principal }) => okFrom(AgentConfigs.use((a) => a.list(principal.userId))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/agent/configs/:address_id",
    summary: "The agent config of an address (defaults when none is stored: mode off, enabled true)",
    params: AddressIdParams,
    response: AgentConfig,
    handler: ({ params, principal }) => okFrom(AgentConfigs.use((a) => a.get(principal.userId, params.address_id))),
  }),
  route({
    ...common,
    method: "put",
    path: "/api/agent/configs/:address_id",
    summary: "Set the agent of an address: off, draft (replies kept for review) or auto (replies sent)",
    description: [
      "`mode` is required. Omitted optional fields keep their current value; `null` clears `persona` and the `reply_from_*` fields.",
      `\`persona\` is the system prompt (at most ${MAX_PERSONA_CHARS} characters); without one the agent uses a default that refuses to invent facts.`,
      "`reply_from_domain_id` / `reply_from_address` choose the From of auto replies with the same rules as `from_domain_id` / `from_address` of POST /api/outbound/emails.",
      "Auto replies are billed like any outbound send (5 TZS). They are never sent to bounces, auto-responders, bulk or list mail, or a sender already answered in the same thread within 24 hours.",
    ].join(" "),
    params: AddressIdParams,
    body: PutAgentConfigBody,
    response: AgentConfig,
    handler: ({ params, body, principal }) =>
      okFrom(AgentConfigs.use((a) => a.put(principal.userId, params.address_id, body))),
  }),
  route({
    ...common,
    method: "post",
    path: "/api/agent/configs/:address_id/draft",
    summary: "Preview the reply the agent would write to a message (never sent, never stored)",
    description: "At least one of `subject` and `text_body` must be non-empty. 503 NOT_CONFIGURED when the AI gateway is not configured.",
    params: AddressIdParams,
    body: DraftBody,
    response: Schema.Struct({ draft: Schema.String }),
    handler: ({ params, body, principal }) =>
      Effect.map(AgentConfigs.use((a) => a.draft(principal.userId, params.address_id, body)), (draft) => ok({ draft }, { message: "draft generated" })),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/agent/drafts",
    summary: "Replies written in draft mode, kept for review, newest first",
    query: AddressPageQuery,
    response: Schema.Array(AgentDraft),
    handler: ({ query, principal }) =>
      paged(query, (page) => AgentConfigs.use((a) => a.drafts(principal.userId, query.address_id, page))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/agent/jobs",
    summary: "What the agent did with each message of an address (replied, drafted, skipped with the reason, failed), newest first",
    query: AddressPageQuery,
    response: Schema.Array(AgentJob),
    handler: ({ query, principal }) =>
      paged(query, (page) => AgentConfigs.use((a) => a.jobs(principal.userId, query.address_id, page))),
  }),
]
