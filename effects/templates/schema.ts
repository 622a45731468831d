/** Template as the API shows it (SPEC.md "Template"), its request bodies and row mapping. */
import { Schema } from "effect"
import { BoundedString, iso, MAX_SUBJECT_CHARS, MultilineText, Text } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

export const TemplateName = BoundedString(200, "name")
/** Subjects are one header line: bounded, no line breaks. */
export const TemplateSubject = Text.check(
  Schema.isMaxLength(MAX_SUBJECT_CHARS, msg(`subject must be at most ${MAX_SUBJECT_CHARS} characters`)),
  Schema.isPattern(/^[^\r\n]*$/, msg("subject must be a single line")),
)
/**
 * A template body's characters at most. Templates are free to keep and their list is answered
 * whole (SPEC.md), so without a bound 100 templates of 30 MiB made one GET a 3 GB answer. 512 KiB
 * is five times what mail clients show before clipping an HTML message (Gmail: 102 KB).
 */
export const MAX_TEMPLATE_BODY_CHARS = 512 * 1024
const Body = MultilineText.check(
  Schema.isMaxLength(MAX_TEMPLATE_BODY_CHARS, msg(`a template body must be at most ${MAX_TEMPLATE_BODY_CHARS} characters`)),
)

export const CreateTemplateBody = Schema.Struct({
  name: TemplateName,
  subject: Schema.optional(Schema.NullOr(TemplateSubject)),
  html_body: Schema.optional(Schema.NullOr(Body)),
  text_body: Schema.optional(Schema.NullOr(Body)),
})
export type CreateTemplateBody = typeof CreateTemplateBody.Type

/** PATCH is a full replacement: every field is sent (null clears an optional one). */
export const ReplaceTemplateBody = Schema.Struct({
  name: TemplateName,
  subject: Schema.NullOr(TemplateSubject),
  html_body: Schema.NullOr(Body),
  text_body: Schema.NullOr(Body),
})
export type ReplaceTemplateBody = typeof ReplaceTemplateBody.Type

export const Template = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  subject: Schema.NullOr(Schema.String),
  html_body: Schema.NullOr(Schema.String),
  text_body: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
})
export type Template = typeof Template.Type

export interface TemplateRow {
  readonly id: number
  readonly user_id: number
  readonly name: string
  readonly subject: string | null
  readonly html_body: string | null
  readonly text_body: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

export const toTemplate = (row: TemplateRow): Template => ({
  id: row.id,
  name: row.name,
  subject: row.subject,
  html_body: row.html_body,
  text_body: row.text_body,
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!,
})
