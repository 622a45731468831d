/**
 * Every route of the service. Each capability owns one file here and exports its list;
 * add a capability by adding its list below.
 */
import { Effect } from "effect"
import { AppConfig, chosenProviders, type Settings } from "../../../effects/config.ts"
import { docsPage, openApiDocument } from "../openapi.ts"
import { ok, type Route, route } from "../route.ts"
import { agentRoutes } from "./agent.ts"
import { apiKeyRoutes } from "./apikeys.ts"
import { authRoutes } from "./auth.ts"
import { billingRoutes } from "./billing.ts"
import { fakeGatewayRoutes } from "./fake-gateway.ts"
import { complianceRoutes } from "./compliance.ts"
import { domainRoutes } from "./domains.ts"
import { inboundRoutes } from "./inbound.ts"
import { outboundRoutes } from "./outbound.ts"
import { sandboxRoutes } from "./sandbox.ts"
import { smsRoutes } from "./sms.ts"
import { templateRoutes } from "./templates.ts"
import { healthRoutes } from "./system.ts"
import { webhookRoutes } from "./webhooks.ts"
import { eventEndpointRoutes } from "./event-endpoints.ts"

export const capabilityRoutes: ReadonlyArray<Route> = [
  ...healthRoutes,
  ...webhookRoutes,
  ...smsRoutes,
  ...agentRoutes,
  ...authRoutes,
  ...apiKeyRoutes,
  ...inboundRoutes,
  ...outboundRoutes,
  ...templateRoutes,
  ...sandboxRoutes,
  ...domainRoutes,
  ...complianceRoutes,
  ...billingRoutes,
  ...fakeGatewayRoutes,
  ...eventEndpointRoutes,
]

/** The documents depend only on the routes and the base URL: built at the first request, then served as they are. */
const openApiJson = new Map<string, string>()
let docsHtml: string | undefined

const documentationRoutes: ReadonlyArray<Route> = [
  route({
    method: "get",
    path: "/api/openapi.json",
    auth: "none",
    tag: "System",
    summary: "This API as an OpenAPI 3.1 document",
    internal: true,
    handler: () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        let body = openApiJson.get(config.baseUrl)
        if (body === undefined) openApiJson.set(config.baseUrl, body = JSON.stringify(openApiDocument(capabilityRoutes, config.baseUrl)))
        return ok(undefined, { raw: { body, contentType: "application/json" } })
      }),
  }),
  route({
    method: "get",
    path: "/docs",
    auth: "none",
    tag: "System",
    summary: "Readable API reference",
    internal: true,
    handler: () => Effect.sync(() => ok(undefined, { raw: { body: (docsHtml ??= docsPage(capabilityRoutes)), contentType: "text/html; charset=utf-8" } })),
  }),
]

export const allRoutes: ReadonlyArray<Route> = [...capabilityRoutes, ...documentationRoutes]

/**
 * The routes a running service serves: the fake gateway's pages exist only while it is the
 * active payment provider (DECISIONS.md "Production mode"), so with a live gateway they are
 * not merely refused but absent (404 NOT_FOUND like any unknown path).
 */
export const routesFor = (settings: Settings): ReadonlyArray<Route> =>
  chosenProviders(settings).payment === "fake" ? allRoutes : allRoutes.filter((r) => !fakeGatewayRoutes.includes(r))
