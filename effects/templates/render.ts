/**
 * `{{key}}` placeholders (SPEC.md "Template"): replaced from the send's `variables`; a key with
 * no value renders as the empty string, never an error. In HTML bodies values are escaped, so a
 * variable filled from end-user input cannot inject markup or links; `{{{key}}}` inserts a
 * value as raw HTML when the caller means it (the Mustache convention).
 */
import { escapeHtml } from "../shared/html.ts"

const PLACEHOLDER = /\{\{\{\s*([^{}\s]+)\s*\}\}\}|\{\{\s*([^{}\s]+)\s*\}\}/g

export type Variables = Readonly<Record<string, string>>

// Own keys only: `{{constructor}}` must not reach Object.prototype.
const lookup = (variables: Variables, key: string): string => (Object.hasOwn(variables, key) ? variables[key]! : "")

/** Renders text (subject, text body): values as given. */
export const renderText = (template: string, variables: Variables): string =>
  template.replace(PLACEHOLDER, (_, raw: string | undefined, key: string | undefined) => lookup(variables, (raw ?? key)!))

/** Renders an HTML body: `{{key}}` escaped, `{{{key}}}` raw. */
export const renderHtml = (template: string, variables: Variables): string =>
  template.replace(PLACEHOLDER, (_, raw: string | undefined, key: string | undefined) =>
    raw !== undefined ? lookup(variables, raw) : escapeHtml(lookup(variables, key!)))
