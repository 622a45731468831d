/** SMS notifications (SPEC.md "SMS notifications"): decode, call the service, answer. Scope `sms`. */
import { Schema } from "effect"
import { IdFromString, IdParams, PageQuery } from "../../../effects/shared/schema.ts"
import { CreateSmsRuleBody, SmsDelivery, SmsRule } from "../../../effects/sms/schema.ts"
import { SmsNotifications } from "../../../effects/sms/service.ts"
import { okFrom, paged, route } from "../route.ts"

const common = { auth: "key", scope: "sms", tag: "SMS notifications" } as const

export const smsRoutes = [
  route({
    ...common,
    method: "post",
    path: "/api/sms/notifications",
    summary: "Forward a summary of each message of an address to a phone (the provider key is returned only here)",
    description:
      "`phone_number`: `+255` or `0`, then 6 or 7, then 8 digits; stored as `+255…`. `provider_key` is the account's own key for the SMS provider. At most 10 active rules per address (409 `LIMIT_REACHED`).",
    body: CreateSmsRuleBody,
    response: SmsRule,
    status: 201,
    handler: ({ body, principal }) => okFrom(SmsNotifications.use((s) => s.create(principal.userId, body))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sms/notifications",
    summary: "List the SMS rules of an address",
    query: Schema.Struct({ address_id: IdFromString }),
    response: Schema.Array(SmsRule),
    handler: ({ query, principal }) =>
      okFrom(SmsNotifications.use((s) => s.list(principal.userId, query.address_id))),
  }),
  route({
    ...common,
    method: "post",
    path: "/api/sms/notifications/:id/revoke",
    summary: "Revoke an SMS rule (queued sends of it are dropped)",
    params: IdParams,
    response: SmsRule,
    handler: ({ params, principal }) => okFrom(SmsNotifications.use((s) => s.revoke(principal.userId, params.id))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/sms/notifications/:id/deliveries",
    summary: "Sends of an SMS rule, newest first",
    params: IdParams,
    query: PageQuery,
    response: Schema.Array(SmsDelivery),
    handler: ({ params, query, principal }) =>
      paged(query, (page) => SmsNotifications.use((s) => s.deliveries(principal.userId, params.id, page))),
  }),
]
