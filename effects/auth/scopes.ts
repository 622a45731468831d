/** API key scopes (DECISIONS.md "Scopes per endpoint group"). `full` grants every scope. */
export const SCOPES = [
  "inbound:read",
  "inbound:write",
  "outbound:send",
  "outbound:read",
  "templates",
  "domains",
  "webhooks",
  "billing:read",
  "billing:write",
  "sandbox",
  "sms",
  "compliance",
  "agent",
] as const
export type Scope = typeof SCOPES[number]

export const isScope = (s: string): s is Scope => (SCOPES as ReadonlyArray<string>).includes(s)

/** Parses the stored/requested scopes string: `full` or a comma list. Unknown names are returned in `unknown`. */
export const parseScopes = (raw: string): { full: boolean; scopes: ReadonlyArray<Scope>; unknown: ReadonlyArray<string> } => {
  const names = raw.split(",").map((s) => s.trim()).filter((s) => s !== "")
  if (names.length === 0 || names.includes("full")) {
    return { full: true, scopes: SCOPES, unknown: names.filter((n) => n !== "full" && !isScope(n)) }
  }
  return { full: false, scopes: names.filter(isScope), unknown: names.filter((n) => !isScope(n)) }
}
