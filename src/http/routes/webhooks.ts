/** Webhooks (SPEC.md "Webhooks"): decode, call the Webhooks service, answer. Scope `webhooks`. */
import { Effect, Schema } from "effect"
import { IdFromString, IdParams, PageQuery } from "../../../effects/shared/schema.ts"
import { CreateWebhookBody, UpdateWebhookBody, Webhook, WebhookDelivery, WebhookTestResult } from "../../../effects/webhooks/schema.ts"
import { Webhooks } from "../../../effects/webhooks/service.ts"
import { ok, okFrom, paged, route } from "../route.ts"

const common = { auth: "key", scope: "webhooks", tag: "Webhooks" } as const

export const webhookRoutes = [
  route({
    ...common,
    method: "post",
    path: "/api/webhook/webhooks",
    summary: "Create a webhook on an address (the secret is returned only here)",
    description:
      "The URL must be http or https, without credentials, at most 2048 characters. Without `secret` one is generated (`whsec_` + 32 hex).",
    body: CreateWebhookBody,
    response: Webhook,
    status: 201,
    handler: ({ body, principal }) => okFrom(Webhooks.use((w) => w.create(principal.userId, body))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/webhook/webhooks",
    summary: "List the webhooks of an address",
    query: Schema.Struct({ address_id: IdFromString }),
    response: Schema.Array(Webhook),
    handler: ({ query, principal }) => okFrom(Webhooks.use((w) => w.list(principal.userId, query.address_id))),
  }),
  route({
    ...common,
    method: "patch",
    path: "/api/webhook/webhooks/:id",
    summary: "Activate, deactivate or re-point a webhook",
    params: IdParams,
    body: UpdateWebhookBody,
    response: Webhook,
    handler: ({ params, body, principal }) =>
      okFrom(Webhooks.use((w) => w.update(principal.userId, params.id, body))),
  }),
  route({
    ...common,
    method: "delete",
    path: "/api/webhook/webhooks/:id",
    summary: "Delete a webhook (and its delivery history)",
    params: IdParams,
    response: Schema.Struct({ deleted_webhook_id: Schema.Int }),
    handler: ({ params, principal }) =>
      Effect.as(Webhooks.use((w) => w.remove(principal.userId, params.id)), ok({ deleted_webhook_id: params.id })),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/webhook/webhooks/:id/deliveries",
    summary: "Deliveries of a webhook, newest first",
    params: IdParams,
    query: PageQuery,
    response: Schema.Array(WebhookDelivery),
    handler: ({ params, query, principal }) =>
      paged(query, (page) => Webhooks.use((w) => w.deliveries(principal.userId, params.id, page))),
  }),
  route({
    ...common,
    method: "post",
    path: "/api/webhook/webhooks/trigger/:id",
    summary: "Re-send a stored message's `inbound.message_received` to every active webhook of its address",
    description: "`{id}` is an inbound message id. Answers the queued deliveries; SMS notifications are not sent again.",
    params: IdParams,
    response: Schema.Array(WebhookDelivery),
    handler: ({ params, principal }) => okFrom(Webhooks.use((w) => w.trigger(principal.userId, params.id))),
  }),
  route({
    ...common,
    method: "post",
    path: "/api/webhook/webhooks/:id/test",
    summary: "Send a signed `webhook.test` event now and report the receiver's answer",
    params: IdParams,
    response: WebhookTestResult,
    handler: ({ params, principal }) => okFrom(Webhooks.use((w) => w.test(principal.userId, params.id))),
  }),
]
