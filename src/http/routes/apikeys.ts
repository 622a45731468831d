/** /api/apikeys/*: key management, with a user access token only (a leaked key cannot mint keys). */
import { Effect, Schema } from "effect"
import { ApiKey, ApiKeyData, CreateApiKeyBody, CreatedApiKey } from "../../../effects/apikeys/schema.ts"
import { ApiKeys } from "../../../effects/apikeys/service.ts"
import { IdParams } from "../../../effects/shared/schema.ts"
import { ok, route } from "../route.ts"

const tag = "API keys"

const revokeHandler = ({ params, principal }: { params: { id: number }; principal: { userId: number } }) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return ok({ api_key: yield* keys.revoke(principal.userId, params.id) }, { message: "API key revoked" })
  })

export const apiKeyRoutes = [
  route({
    method: "post",
    path: "/api/apikeys",
    auth: "jwt",
    tag,
    summary: "Create an API key (the plaintext key is returned only here)",
    body: CreateApiKeyBody,
    response: CreatedApiKey,
    status: 201,
    handler: ({ body, principal }) =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        return ok(yield* keys.create(principal.userId, body), { message: "API key created; store it now, it is not shown again" })
      }),
  }),
  route({
    method: "get",
    path: "/api/apikeys",
    auth: "jwt",
    tag,
    summary: "Active (non-revoked) API keys",
    response: Schema.Array(ApiKey),
    handler: ({ principal }) =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        return ok(yield* keys.list(principal.userId))
      }),
  }),
  route({
    method: "delete",
    path: "/api/apikeys/:id",
    auth: "jwt",
    tag,
    summary: "Revoke an API key",
    params: IdParams,
    response: ApiKeyData,
    handler: revokeHandler,
  }),
  route({
    method: "post",
    path: "/api/apikeys/:id/revoke",
    auth: "jwt",
    tag,
    summary: "Revoke an API key (same as DELETE)",
    params: IdParams,
    response: ApiKeyData,
    handler: revokeHandler,
  }),
]
