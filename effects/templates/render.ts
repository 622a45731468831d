/**
 * `{{key}}` placeholders (SPEC.md "Template"): replaced from the send's `variables`; a key with
 * no value renders as the empty string, never an error. In HTML bodies values are escaped, so a
 * variable filled from end-user input cannot inject markup or links; `{{{key}}}` inserts a
 * value as raw HTML when the caller means it (the Mustache convention).
 *
 * Rendering is bounded: a body of many placeholders and a long value multiply (200,000 `{{a}}` in
 * 1 MB and a 10 KB value would make 2 GB). Past `limit` characters rendering stops and answers
 * undefined, before the long string is built, so the caller can refuse the send with a 400.
 */
import { escapeHtml } from "../shared/html.ts"

const PLACEHOLDER = /\{\{\{\s*([^{}\s]+)\s*\}\}\}|\{\{\s*([^{}\s]+)\s*\}\}/g

export type Variables = Readonly<Record<string, string>>

// Own keys only: `{{constructor}}` must not reach Object.prototype.
const lookup = (variables: Variables, key: string): string => (Object.hasOwn(variables, key) ? variables[key]! : "")

/** `template` with each placeholder replaced by `value(raw, key)`, or undefined past `limit` characters. */
const render = (template: string, limit: number, value: (raw: string | undefined, key: string | undefined) => string): string | undefined => {
  const pieces: Array<string> = []
  // Each placeholder's value made once (an HTML value is escaped once, however often it is used).
  const made = new Map<string, string>()
  let length = 0
  let from = 0
  for (const m of template.matchAll(PLACEHOLDER)) {
    const id = m[1] !== undefined ? `{${m[1]}` : m[2]!
    let filled = made.get(id)
    if (filled === undefined) made.set(id, (filled = value(m[1], m[2])))
    length += m.index - from + filled.length
    if (length > limit) return undefined
    pieces.push(template.slice(from, m.index), filled)
    from = m.index + m[0].length
  }
  length += template.length - from
  if (length > limit) return undefined
  pieces.push(template.slice(from))
  return pieces.join("")
}

/** Renders text (subject, text body): values as given. Undefined when longer than `limit` characters. */
export const renderText = (template: string, variables: Variables, limit = Infinity): string | undefined =>
  render(template, limit, (raw, key) => lookup(variables, (raw ?? key)!))

/** Renders an HTML body: `{{key}}` escaped, `{{{key}}}` raw. Undefined when longer than `limit` characters. */
export const renderHtml = (template: string, variables: Variables, limit = Infinity): string | undefined =>
  render(template, limit, (raw, key) => (raw !== undefined ? lookup(variables, raw) : escapeHtml(lookup(variables, key!))))
