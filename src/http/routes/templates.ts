/** Templates (SPEC.md "Outbound email", "Template"): decode, call the Templates service, answer. Scope `templates`. */
import { Effect, Schema } from "effect"
import { IdParams } from "../../../effects/shared/schema.ts"
import { CreateTemplateBody, ReplaceTemplateBody, Template } from "../../../effects/templates/schema.ts"
import { Templates } from "../../../effects/templates/service.ts"
import { ok, okFrom, route } from "../route.ts"

const common = { auth: "key", scope: "templates", tag: "Templates" } as const

export const templateRoutes = [
  route({
    ...common,
    method: "post",
    path: "/api/outbound/templates",
    summary: "Create a template",
    description: "`{{key}}` placeholders are filled from a send's `variables` (escaped in html_body; `{{{key}}}` inserts raw HTML). Names are unique per account. An account keeps at most 100 templates (409 `LIMIT_REACHED`); each body is at most 524,288 characters.",
    body: CreateTemplateBody,
    response: Template,
    status: 201,
    handler: ({ body, principal }) => okFrom(Templates.use((t) => t.create(principal.userId, body))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/outbound/templates",
    summary: "List templates",
    response: Schema.Array(Template),
    handler: ({ principal }) => okFrom(Templates.use((t) => t.list(principal.userId))),
  }),
  route({
    ...common,
    method: "get",
    path: "/api/outbound/templates/:id",
    summary: "One template",
    params: IdParams,
    response: Template,
    handler: ({ params, principal }) => okFrom(Templates.use((t) => t.get(principal.userId, params.id))),
  }),
  route({
    ...common,
    method: "patch",
    path: "/api/outbound/templates/:id",
    summary: "Replace a template (send every field; null clears subject or a body)",
    params: IdParams,
    body: ReplaceTemplateBody,
    response: Template,
    handler: ({ params, body, principal }) => okFrom(Templates.use((t) => t.replace(principal.userId, params.id, body))),
  }),
  route({
    ...common,
    method: "delete",
    path: "/api/outbound/templates/:id",
    summary: "Delete a template (messages sent with it keep their content)",
    params: IdParams,
    response: Schema.Struct({ deleted_template_id: Schema.Int }),
    handler: ({ params, principal }) =>
      Effect.as(Templates.use((t) => t.remove(principal.userId, params.id)), ok({ deleted_template_id: params.id })),
  }),
]
