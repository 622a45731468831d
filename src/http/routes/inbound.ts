/** Inbound addresses, messages and receiving domains (SPEC.md "Inbound …", "Receiving domains"). */
import { Effect, Schema } from "effect"
import { CreateInboundAddress, InboundAddress } from "../../../effects/addresses/schema.ts"
import { InboundAddresses } from "../../../effects/addresses/service.ts"
import { InboundMessage, MessageListQuery } from "../../../effects/messages/schema.ts"
import { InboundMessages } from "../../../effects/messages/service.ts"
import { CreateReceivingDomain, ReceivingDomain } from "../../../effects/receiving-domains/schema.ts"
import { ReceivingDomains } from "../../../effects/receiving-domains/service.ts"
import { IdParams } from "../../../effects/shared/schema.ts"
import { emlDownload, ok, route } from "../route.ts"

const addressRoutes = [
  route({
    method: "post",
    path: "/api/inbound/addresses",
    auth: "key",
    scope: "inbound:write",
    tag: "Inbound addresses",
    summary: "Create an inbound address",
    description: "On the platform domain, or on a verified receiving domain of the account (`domain_id`). Needs a verified email or phone.",
    body: CreateInboundAddress,
    response: InboundAddress,
    status: 201,
    handler: ({ body, principal }) => InboundAddresses.use((a) => a.create(principal.userId, body)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "get",
    path: "/api/inbound/addresses",
    auth: "key",
    scope: "inbound:read",
    tag: "Inbound addresses",
    summary: "List the account's inbound addresses",
    response: Schema.Array(InboundAddress),
    handler: ({ principal }) => InboundAddresses.use((a) => a.list(principal.userId)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "delete",
    path: "/api/inbound/addresses/:id",
    auth: "key",
    scope: "inbound:write",
    tag: "Inbound addresses",
    summary: "Delete an inbound address and all its messages",
    params: IdParams,
    handler: ({ params, principal }) =>
      InboundAddresses.use((a) => a.remove(principal.userId, params.id)).pipe(
        Effect.map(() => ok({ deleted_address_id: params.id }, { message: "address deleted" })),
      ),
  }),
]

const messageRoutes = [
  route({
    method: "get",
    path: "/api/inbound/messages",
    auth: "key",
    scope: "inbound:read",
    tag: "Inbound messages",
    summary: "List an address's messages, newest first",
    description: "Attachments are listed without `content`; GET /api/inbound/messages/{id} returns it.",
    query: MessageListQuery,
    response: Schema.Array(InboundMessage),
    handler: ({ query, principal }) =>
      InboundMessages.use((m) =>
        m.list(principal.userId, {
          addressId: query.address_id,
          unreadOnly: query.unread === "true",
          page: query.page ?? 1,
          perPage: query.per_page ?? 20,
        })
      ).pipe(Effect.map((r) => ok(r.data, { pagination: r.pagination, more: r.more }))),
  }),
  route({
    method: "get",
    path: "/api/inbound/messages/:id",
    auth: "key",
    scope: "inbound:read",
    tag: "Inbound messages",
    summary: "One message with full bodies and base64 attachments",
    params: IdParams,
    response: InboundMessage,
    handler: ({ params, principal }) => InboundMessages.use((m) => m.get(principal.userId, params.id)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "get",
    path: "/api/inbound/messages/:id/raw",
    auth: "key",
    scope: "inbound:read",
    tag: "Inbound messages",
    summary: "The message as received (message/rfc822)",
    params: IdParams,
    handler: ({ params, principal }) =>
      Effect.map(InboundMessages.use((m) => m.raw(principal.userId, params.id)), (raw) => emlDownload(raw, `message-${params.id}`)),
  }),
  route({
    method: "patch",
    path: "/api/inbound/messages/:id/read",
    auth: "key",
    scope: "inbound:write",
    tag: "Inbound messages",
    summary: "Mark a message read",
    params: IdParams,
    response: InboundMessage,
    handler: ({ params, principal }) =>
      InboundMessages.use((m) => m.markRead(principal.userId, params.id)).pipe(Effect.map((x) => ok(x, { message: "marked read" }))),
  }),
]

const domainRoutes = [
  route({
    method: "post",
    path: "/api/inbound/domains",
    auth: "key",
    scope: "inbound:write",
    tag: "Receiving domains",
    summary: "Add a receiving domain",
    description: "Publish the three records returned, then call verify.",
    body: CreateReceivingDomain,
    response: ReceivingDomain,
    status: 201,
    handler: ({ body, principal }) => ReceivingDomains.use((d) => d.create(principal.userId, body.domain)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "get",
    path: "/api/inbound/domains",
    auth: "key",
    scope: "inbound:read",
    tag: "Receiving domains",
    summary: "List receiving domains",
    response: Schema.Array(ReceivingDomain),
    handler: ({ principal }) => ReceivingDomains.use((d) => d.list(principal.userId)).pipe(Effect.map((x) => ok(x))),
  }),
  route({
    method: "post",
    path: "/api/inbound/domains/:id/verify",
    auth: "key",
    scope: "inbound:write",
    tag: "Receiving domains",
    summary: "Check the DNS records now",
    description: "Verified, or HTTP 200 with success false, error code PENDING and the domain in data while DNS is not there yet.",
    params: IdParams,
    response: ReceivingDomain,
    handler: ({ params, principal }) =>
      ReceivingDomains.use((d) => d.verify(principal.userId, params.id)).pipe(Effect.map((x) => ok(x, { message: "domain verified" }))),
  }),
  route({
    method: "delete",
    path: "/api/inbound/domains/:id",
    auth: "key",
    scope: "inbound:write",
    tag: "Receiving domains",
    summary: "Delete a receiving domain no address uses",
    params: IdParams,
    handler: ({ params, principal }) =>
      ReceivingDomains.use((d) => d.remove(principal.userId, params.id)).pipe(
        Effect.map(() => ok({ deleted_domain_id: params.id }, { message: "domain deleted" })),
      ),
  }),
]

export const inboundRoutes = [...addressRoutes, ...messageRoutes, ...domainRoutes]
