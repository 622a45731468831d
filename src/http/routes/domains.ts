/** Sending domains and sender addresses (SPEC.md "Sending domains and sender addresses"). Scope `domains`. */
import { Effect, Schema } from "effect"
import { CreatedSendingDomain, CreateSenderAddress, CreateSendingDomain, SenderAddress, SendingDomain } from "../../../effects/sending-domains/schema.ts"
import { SendingDomains } from "../../../effects/sending-domains/service.ts"
import { IdParams } from "../../../effects/shared/schema.ts"
import { ok, okFrom, route } from "../route.ts"

const common = { auth: "key", scope: "domains" } as const
const domains = { ...common, tag: "Sending domains" } as const
const senders = { ...common, tag: "Sender addresses" } as const

export const domainRoutes = [
  route({
    ...domains,
    method: "post",
    path: "/api/domains",
    summary: "Add a sending domain",
    description:
      "Answers the domain (pending) and the three TXT records to publish: DKIM at `mail._domainkey.<domain>`, SPF at the domain, DMARC at `_dmarc.<domain>`. `from_local_part` (default `noreply`) is the domain's default sender. At most 5 per account.",
    body: CreateSendingDomain,
    response: CreatedSendingDomain,
    status: 201,
    handler: ({ body, principal }) => okFrom(SendingDomains.use((d) => d.create(principal.userId, body))),
  }),
  route({
    ...domains,
    method: "get",
    path: "/api/domains",
    summary: "List sending domains",
    response: Schema.Array(SendingDomain),
    handler: ({ principal }) => okFrom(SendingDomains.use((d) => d.list(principal.userId))),
  }),
  route({
    ...senders,
    method: "get",
    path: "/api/domains/senders",
    summary: "List sender addresses",
    description: "Every recorded sender of the account's domains, plus the default local part of each verified domain.",
    response: Schema.Array(SenderAddress),
    handler: ({ principal }) => okFrom(SendingDomains.use((d) => d.listSenders(principal.userId))),
  }),
  route({
    ...senders,
    method: "delete",
    path: "/api/domains/senders/:id",
    summary: "Delete a sender address",
    description: "A domain's default sender cannot be deleted on its own (409 CONFLICT).",
    params: IdParams,
    response: Schema.Struct({ deleted_sender_id: Schema.Int }),
    handler: ({ params, principal }) =>
      Effect.as(SendingDomains.use((d) => d.removeSender(principal.userId, params.id)), ok({ deleted_sender_id: params.id }, { message: "sender deleted" })),
  }),
  route({
    ...domains,
    method: "post",
    path: "/api/domains/:id/verify",
    summary: "Check the DKIM, SPF and DMARC records now",
    description:
      "Answers 200 with the domain: `status` is `verified` once all three records are in DNS, else it stays as it was (`pending`), without saying which record is missing or wrong.",
    params: IdParams,
    response: SendingDomain,
    handler: ({ params, principal }) =>
      Effect.map(
        SendingDomains.use((d) => d.verify(principal.userId, params.id)),
        (data) => ok(data, { message: data.status === "verified" ? "domain verified" : "DNS records are not all in place yet" }),
      ),
  }),
  route({
    ...domains,
    method: "delete",
    path: "/api/domains/:id",
    summary: "Delete a sending domain and its sender addresses",
    params: IdParams,
    response: Schema.Struct({ deleted_domain_id: Schema.Int }),
    handler: ({ params, principal }) =>
      Effect.as(SendingDomains.use((d) => d.remove(principal.userId, params.id)), ok({ deleted_domain_id: params.id }, { message: "domain deleted" })),
  }),
  route({
    ...senders,
    method: "post",
    path: "/api/domains/:id/senders",
    summary: "Add a sender address to a sending domain",
    description: "`local_part` is 1 to 64 of `[a-z0-9-]`. At most 100 per account (default senders do not count).",
    params: IdParams,
    body: CreateSenderAddress,
    response: SenderAddress,
    status: 201,
    handler: ({ params, body, principal }) =>
      okFrom(SendingDomains.use((d) => d.addSender(principal.userId, params.id, body.local_part))),
  }),
]
