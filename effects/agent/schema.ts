/**
 * The AI auto-reply resources as the API shows them (SPEC.md "AgentConfig"; DECISIONS.md
 * "Retention, SMS, agent"), their request bodies, and the mapping from their rows.
 * AgentDraft and AgentJob are this service's own additions: the drafts kept for review and the
 * recorded outcome of every inbound message the agent looked at.
 */
import { Schema } from "effect"
import { Email, Id, IdFromString, iso, MultilineText, Text } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

export const AgentMode = Schema.Literals(["off", "draft", "auto"]).annotate(msg("mode must be one of off, draft or auto"))
export type AgentMode = typeof AgentMode.Type

/** Longest persona (system prompt) accepted. */
export const MAX_PERSONA_CHARS = 4000

export const AgentConfig = Schema.Struct({
  address_id: Schema.Int,
  user_id: Schema.Int,
  mode: AgentMode,
  /** The system prompt; null means the built-in one that refuses to invent facts. */
  persona: Schema.NullOr(Schema.String),
  enabled: Schema.Boolean,
  reply_from_domain_id: Schema.NullOr(Schema.Int),
  reply_from_address: Schema.NullOr(Schema.String),
  updated_at: Schema.String,
})
export type AgentConfig = typeof AgentConfig.Type

/**
 * PUT body. `mode` is required; an omitted optional field keeps its current value (the default
 * for a new config), `null` clears persona and the reply_from fields.
 */
export const PutAgentConfigBody = Schema.Struct({
  mode: AgentMode,
  enabled: Schema.optional(Schema.Boolean),
  persona: Schema.optional(
    Schema.NullOr(MultilineText.check(Schema.isMaxLength(MAX_PERSONA_CHARS, msg(`persona must be at most ${MAX_PERSONA_CHARS} characters`)))),
  ),
  reply_from_domain_id: Schema.optional(Schema.NullOr(Id)),
  reply_from_address: Schema.optional(Schema.NullOr(Email)),
})
export type PutAgentConfigBody = typeof PutAgentConfigBody.Type

/** Draft preview: at least one of the two must be non-empty (checked by the service). */
export const DraftBody = Schema.Struct({
  subject: Schema.optional(Text.check(Schema.isMaxLength(998, msg("subject must be at most 998 characters")))),
  text_body: Schema.optional(MultilineText.check(Schema.isMaxLength(20_000, msg("text_body must be at most 20000 characters")))),
})
export type DraftBody = typeof DraftBody.Type

export const AddressIdParams = Schema.Struct({ address_id: IdFromString })

export const AgentDraft = Schema.Struct({
  id: Schema.Int,
  address_id: Schema.Int,
  /** The inbound message answered. */
  message_id: Schema.Int,
  /** Who the reply would go to (Reply-To, else From of that message). */
  to_address: Schema.String,
  subject: Schema.String,
  text_body: Schema.String,
  created_at: Schema.String,
})
export type AgentDraft = typeof AgentDraft.Type

export const AgentJobStatus = Schema.Literals(["pending", "replied", "drafted", "skipped", "failed"])
export type AgentJobStatus = typeof AgentJobStatus.Type

export const AgentJob = Schema.Struct({
  id: Schema.Int,
  address_id: Schema.Int,
  message_id: Schema.Int,
  status: AgentJobStatus,
  /** Why it was skipped or failed (or the last retryable error while pending). */
  reason: Schema.NullOr(Schema.String),
  attempt: Schema.Int,
  /** The sent reply (GET /api/outbound/emails/{id}) when `replied`. */
  outbound_message_id: Schema.NullOr(Schema.Int),
  /** The stored draft when `drafted`. */
  draft_id: Schema.NullOr(Schema.Int),
  next_attempt_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String),
})
export type AgentJob = typeof AgentJob.Type

export interface AgentConfigRow {
  readonly address_id: number
  readonly user_id: number
  readonly mode: AgentMode
  readonly persona: string | null
  readonly enabled: boolean
  readonly reply_from_domain_id: number | null
  readonly reply_from_address: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface AgentJobRow {
  readonly id: number
  readonly user_id: number
  readonly address_id: number
  readonly message_id: number
  readonly status: AgentJobStatus
  readonly reason: string | null
  readonly attempt: number
  readonly next_attempt_at: Date | null
  readonly locked_until: Date | null
  readonly sender: string | null
  readonly thread_key: string | null
  readonly reply_text: string | null
  readonly sending_at: Date | null
  readonly outbound_message_id: number | null
  readonly draft_id: number | null
  readonly created_at: Date
  readonly finished_at: Date | null
}

export interface AgentDraftRow {
  readonly id: number
  readonly user_id: number
  readonly address_id: number
  readonly message_id: number
  readonly to_address: string
  readonly subject: string
  readonly text_body: string
  readonly created_at: Date
}

export const toAgentConfig = (row: AgentConfigRow): AgentConfig => ({
  address_id: row.address_id,
  user_id: row.user_id,
  mode: row.mode,
  persona: row.persona,
  enabled: row.enabled,
  reply_from_domain_id: row.reply_from_domain_id,
  reply_from_address: row.reply_from_address,
  updated_at: iso(row.updated_at)!,
})

export const toAgentDraft = (row: AgentDraftRow): AgentDraft => ({
  id: row.id,
  address_id: row.address_id,
  message_id: row.message_id,
  to_address: row.to_address,
  subject: row.subject,
  text_body: row.text_body,
  created_at: iso(row.created_at)!,
})

export const toAgentJob = (row: AgentJobRow): AgentJob => ({
  id: row.id,
  address_id: row.address_id,
  message_id: row.message_id,
  status: row.status,
  reason: row.reason,
  attempt: row.attempt,
  outbound_message_id: row.outbound_message_id,
  draft_id: row.draft_id,
  next_attempt_at: row.status === "pending" ? iso(row.next_attempt_at) : null,
  created_at: iso(row.created_at)!,
  finished_at: iso(row.finished_at),
})
