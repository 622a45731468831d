/**
 * Account event endpoints (DECISIONS.md "Bounces, complaints and outbound events"): decode,
 * call the EventEndpoints service, answer. Scope `webhooks`.
 */
import { Effect, Schema } from "effect"
import { IdParams, PageQuery } from "../../../effects/shared/schema.ts"
import {
  CreateEventEndpointBody,
  EVENT_NAMES,
  EventDelivery,
  EventEndpoint,
  UpdateEventEndpointBody,
} from "../../../effects/webhooks/endpoint-schema.ts"
import { EventEndpoints } from "../../../effects/webhooks/endpoints.ts"
import { ok, okFrom, paged, route } from "../route.ts"

const common = { auth: "key", scope: "webhooks", tag: "Event endpoints" } as const

const events = EVENT_NAMES.map((e) => `\`${e}\``).join(", ")

export const eventEndpointRoutes = [
  route({
    ...common,
    method: "post",
    path: "/api/webhook/endpoints",
    summary: "Create an account event endpoint (the secret is returned only here)",
    description:
      `\`events\`: one or more of ${events}. Deliveries are signed, retried and SSRF-guarded like inbox webhooks. ` +
      "Outbound events carry `{event, email_id, recipient, status, smtp_code, diagnostic, timestamp}`; " +
      "`inbound.message_received` carries the inbox webhook's payload with `webhook_id` naming the endpoint.",
    body: CreateEventEndpointBody,
    response: EventEndpoint,
    status: 201,
    handler: ({ body, principal }) => okFrom(EventEndpoints.use((s) => s.create(principal.userId, body))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/webhook/endpoints",
    summary: "List the account's event endpoints",
    response: Schema.Array(EventEndpoint),
    handler: ({ principal }) => okFrom(EventEndpoints.use((s) => s.list(principal.userId))),
  }),
  route({
    ...common,
    method: "patch",
    path: "/api/webhook/endpoints/:id",
    summary: "Change an endpoint's URL, events or is_active",
    description: "A receiver answering 410 Gone deactivates its endpoint; `{\"is_active\": true}` turns it back on.",
    params: IdParams,
    body: UpdateEventEndpointBody,
    response: EventEndpoint,
    handler: ({ params, body, principal }) =>
      okFrom(EventEndpoints.use((s) => s.update(principal.userId, params.id, body))),
  }),
  route({
    ...common,
    method: "delete",
    path: "/api/webhook/endpoints/:id",
    summary: "Delete an endpoint (and its delivery history)",
    params: IdParams,
    response: Schema.Struct({ deleted_endpoint_id: Schema.Int }),
    handler: ({ params, principal }) =>
      Effect.as(EventEndpoints.use((s) => s.remove(principal.userId, params.id)), ok({ deleted_endpoint_id: params.id })),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/webhook/endpoints/:id/deliveries",
    summary: "Deliveries of an endpoint, newest first",
    params: IdParams,
    query: PageQuery,
    response: Schema.Array(EventDelivery),
    handler: ({ params, query, principal }) =>
      paged(query, (page) => EventEndpoints.use((e) => e.deliveries(principal.userId, params.id, page))),
  }),
]
