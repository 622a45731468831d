/**
 * OpenAPI 3.1 document generated from the route declarations (the same schemas that validate
 * requests), served at /api/openapi.json, and a small reference page at /docs.
 */
import { Schema } from "effect"
import { escapeHtml } from "../../effects/shared/html.ts"
import type { Route } from "./route.ts"

type JsonObject = Record<string, unknown>

/**
 * Named definitions go to `components/schemas`: a `$ref` inside an OpenAPI document resolves
 * against the document's root, so `#/$defs/X` embedded in an operation would point nowhere.
 */
type Definitions = Record<string, unknown>

const DEFS_REF = "#/$defs/"
const COMPONENTS_REF = "#/components/schemas/"

const rewriteRefs = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(rewriteRefs)
  if (node === null || typeof node !== "object") return node
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [
      k,
      k === "$ref" && typeof v === "string" && v.startsWith(DEFS_REF) ? COMPONENTS_REF + v.slice(DEFS_REF.length) : rewriteRefs(v),
    ]),
  )
}

const jsonSchema = (schema: Route["body"], definitions: Definitions): JsonObject => {
  if (!schema) return {}
  const doc = Schema.toJsonSchemaDocument(schema as Schema.Top)
  for (const [name, def] of Object.entries(doc.definitions as JsonObject)) definitions[name] ??= rewriteRefs(def)
  return rewriteRefs(doc.schema) as JsonObject
}

const envelopeOf = (data: JsonObject | undefined): JsonObject => ({
  type: "object",
  required: ["success", "timestamp"],
  properties: {
    success: { type: "boolean" },
    message: { type: "string" },
    ...(data ? { data } : {}),
    errors: { type: "array", items: { $ref: "#/components/schemas/ErrorItem" } },
    pagination: { anyOf: [{ $ref: "#/components/schemas/Pagination" }, { type: "null" }] },
    request_id: { type: "string" },
    timestamp: { type: "string", format: "date-time" },
  },
})

const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, "{$1}")

const parametersOf = (r: Route, definitions: Definitions): Array<JsonObject> => {
  const out: Array<JsonObject> = []
  for (const [where, schema] of [["path", r.params], ["query", r.query]] as const) {
    if (!schema) continue
    const s = jsonSchema(schema, definitions) as { properties?: Record<string, JsonObject>; required?: Array<string> }
    for (const [name, prop] of Object.entries(s.properties ?? {})) {
      out.push({ name, in: where, required: where === "path" || (s.required ?? []).includes(name), schema: prop })
    }
  }
  return out
}

const errorResponse = (description: string) => ({
  description,
  content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
})

export const openApiDocument = (routes: ReadonlyArray<Route>, baseUrl: string): JsonObject => {
  const paths: Record<string, Record<string, JsonObject>> = {}
  const definitions: Definitions = {}
  for (const r of routes) {
    if (r.internal) continue
    const p = (paths[toOpenApiPath(r.path)] ??= {})
    const success = String(r.status ?? 200)
    p[r.method] = {
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [r.tag],
      operationId: `${r.method}_${r.path.replace(/[^A-Za-z0-9]+/g, "_").replace(/^_|_$/g, "")}`,
      ...(r.auth === "none" ? { security: [] } : r.auth === "jwt" ? { security: [{ bearerJwt: [] }] } : {
        security: [{ apiKeyHeader: [] }, { bearerApiKey: [] }, { bearerJwt: [] }],
      }),
      ...(r.scope ? { "x-required-scope": r.scope } : {}),
      parameters: parametersOf(r, definitions),
      ...(r.body
        ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(r.body, definitions) } } } }
        : {}),
      responses: {
        [success]: {
          description: "success",
          content: { "application/json": { schema: envelopeOf(r.response ? jsonSchema(r.response, definitions) : undefined) } },
        },
        "400": errorResponse("VALIDATION_ERROR (one entry per bad field)"),
        ...(r.auth !== "none" ? { "401": errorResponse("UNAUTHORIZED"), "403": errorResponse("FORBIDDEN or ACCOUNT_DISABLED") } : {}),
        "429": errorResponse("RATE_LIMITED"),
        "500": errorResponse("INTERNAL_ERROR"),
      },
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Email infrastructure API (TZS)",
      version: "1.0.0",
      description:
        "Inbound addresses with signed webhooks, transactional sending, sandbox SMTP, SMS alerts and AI auto-replies, billed per message (5 TZS) from one wallet.",
    },
    servers: [{ url: baseUrl }],
    paths,
    components: {
      securitySchemes: {
        apiKeyHeader: { type: "apiKey", in: "header", name: "X-API-Key" },
        bearerApiKey: { type: "http", scheme: "bearer", description: "Authorization: Bearer MAIL_<key> (or the raw key)" },
        bearerJwt: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
      },
      schemas: {
        ...definitions,
        ErrorItem: {
          type: "object",
          required: ["code", "message"],
          properties: { field: { type: "string" }, code: { type: "string" }, message: { type: "string" } },
        },
        Pagination: {
          type: "object",
          required: ["page", "per_page", "total", "total_pages"],
          properties: {
            page: { type: "integer" },
            per_page: { type: "integer" },
            total: { type: "integer" },
            total_pages: { type: "integer" },
          },
        },
        ErrorEnvelope: envelopeOf(undefined),
      },
    },
  }
}

/** A dependency-free reference page: every operation grouped by tag, with auth and scope. */
export const docsPage = (routes: ReadonlyArray<Route>): string => {
  const byTag = new Map<string, Array<Route>>()
  for (const r of routes) if (!r.internal) byTag.set(r.tag, [...(byTag.get(r.tag) ?? []), r])
  const sections = [...byTag.entries()].map(([tag, rs]) =>
    `<h2>${escapeHtml(tag)}</h2><table><tr><th>Method</th><th>Path</th><th>Auth</th><th>Scope</th><th>What it does</th></tr>${
      rs.map((r) =>
        `<tr><td><code>${r.method.toUpperCase()}</code></td><td><code>${escapeHtml(toOpenApiPath(r.path))}</code></td><td>${
          r.auth === "none" ? "none" : r.auth === "jwt" ? "JWT" : "API key or JWT"
        }</td><td>${r.scope ?? ""}</td><td>${escapeHtml(r.summary)}</td></tr>`
      ).join("")
    }</table>`
  ).join("")
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>API reference</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}code{font-size:13px}</style>
</head><body><h1>API reference</h1><p>Every response is the JSON envelope <code>{success, message, data, errors, pagination, request_id, timestamp}</code>.
Machine-readable: <a href="/api/openapi.json">/api/openapi.json</a> (OpenAPI 3.1).</p>${sections}</body></html>`
}
