/**
 * AI auto-reply settings of an account's inbound addresses (one AgentConfig per address, the
 * defaults when none is stored), the draft preview, and the review lists: drafts written in
 * `draft` mode and the recorded outcome (AgentJob) of every message the agent looked at.
 * Replies themselves are written by the agent worker (./replier.ts).
 */
import { Clock, Context, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { type Forbidden, type NotConfigured, type NotFound, type ProviderError, ValidationError } from "../errors.ts"
import { AiGateway } from "../ports/AiGateway.ts"
import { Database, type DbError } from "../ports/Database.ts"
import { SenderIdentities } from "../sending-domains/identity.ts"
import { type AgentMailbox, ownedMailbox } from "./mailbox.ts"
import { replyPrompt } from "./prompt.ts"
import {
  type AgentConfig,
  type AgentConfigRow,
  type AgentDraft,
  type AgentDraftRow,
  type AgentJob,
  type AgentJobRow,
  type DraftBody,
  type PutAgentConfigBody,
  toAgentConfig,
  toAgentDraft,
  toAgentJob,
} from "./schema.ts"
import { newestFirst, type Page, type PageOf as Paged } from "../shared/pages.ts"

export interface AgentConfigsShape {
  /** The account's stored configs, by address id. */
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<AgentConfig>, DbError>
  /** The address's config, or the defaults (mode off, enabled) when none is stored. */
  readonly get: (userId: number, addressId: number) => Effect.Effect<AgentConfig, Forbidden | NotFound | DbError>
  /** Creates or updates the config; reply_from_* must pass the sending-domain From rules. */
  readonly put: (
    userId: number,
    addressId: number,
    body: PutAgentConfigBody,
  ) => Effect.Effect<AgentConfig, ValidationError | Forbidden | NotFound | DbError>
  /** A reply the agent would write to this mail, with the address's persona. Never sends, never stores. */
  readonly draft: (
    userId: number,
    addressId: number,
    body: DraftBody,
  ) => Effect.Effect<string, ValidationError | Forbidden | NotFound | ProviderError | NotConfigured | DbError>
  /** Drafts kept for review in `draft` mode, newest first. */
  readonly drafts: (userId: number, addressId: number, page: Page) => Effect.Effect<Paged<AgentDraft>, Forbidden | NotFound | DbError>
  /** What the agent did with each message of the address, newest first. */
  readonly jobs: (userId: number, addressId: number, page: Page) => Effect.Effect<Paged<AgentJob>, Forbidden | NotFound | DbError>
}

/** The contract's field names → this resource's. */
const renameIdentityFields = (e: ValidationError): ValidationError =>
  new ValidationError({
    message: e.message,
    issues: e.issues.map((i) =>
      i.field === "from_address" || i.field === "from_domain_id" ? { ...i, field: `reply_${i.field}` } : i
    ),
  })

export class AgentConfigs extends Context.Service<AgentConfigs, AgentConfigsShape>()("app/AgentConfigs") {
  static readonly layer = Layer.effect(
    AgentConfigs,
    Effect.gen(function*() {
      const db = yield* Database
      const config = yield* AppConfig
      const ai = yield* AiGateway
      const identities = yield* SenderIdentities
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))
      const mailbox = (userId: number, addressId: number) => ownedMailbox(db, config.platformDomain, userId, addressId)

      const stored = (addressId: number) =>
        Effect.map(db.query<AgentConfigRow>("SELECT * FROM agent_configs WHERE address_id = $1", [addressId]), (rows) => rows[0])

      const defaults = (box: AgentMailbox): AgentConfig => ({
        address_id: box.id,
        user_id: box.user_id,
        mode: "off",
        persona: null,
        enabled: true,
        reply_from_domain_id: null,
        reply_from_address: null,
        updated_at: box.created_at.toISOString(),
      })

      const list = Effect.fn("AgentConfigs.list")(function*(userId: number) {
        const rows = yield* db.query<AgentConfigRow>("SELECT * FROM agent_configs WHERE user_id = $1 ORDER BY address_id", [userId])
        return rows.map(toAgentConfig)
      })

      const get = Effect.fn("AgentConfigs.get")(function*(userId: number, addressId: number) {
        const box = yield* mailbox(userId, addressId)
        const row = yield* stored(addressId)
        return row ? toAgentConfig(row) : defaults(box)
      })

      const put = Effect.fn("AgentConfigs.put")(function*(userId: number, addressId: number, body: PutAgentConfigBody) {
        const current = yield* get(userId, addressId)
        const persona = body.persona === undefined ? current.persona : body.persona?.trim() ? body.persona : null
        const domainId = body.reply_from_domain_id === undefined ? current.reply_from_domain_id : body.reply_from_domain_id
        const fromAddress = body.reply_from_address === undefined ? current.reply_from_address : body.reply_from_address
        if (domainId !== null || fromAddress !== null) {
          yield* identities.senderIdentity(userId, {
            ...(domainId !== null ? { from_domain_id: domainId } : {}),
            ...(fromAddress !== null ? { from_address: fromAddress } : {}),
          }).pipe(Effect.mapError((e) => (e._tag === "ValidationError" ? renameIdentityFields(e) : e)))
        }
        const at = yield* now
        const [row] = yield* db.query<AgentConfigRow>(
          `INSERT INTO agent_configs (address_id, user_id, mode, persona, enabled, reply_from_domain_id, reply_from_address, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
           ON CONFLICT (address_id) DO UPDATE
              SET mode = EXCLUDED.mode, persona = EXCLUDED.persona, enabled = EXCLUDED.enabled,
                  reply_from_domain_id = EXCLUDED.reply_from_domain_id, reply_from_address = EXCLUDED.reply_from_address,
                  updated_at = EXCLUDED.updated_at
           RETURNING *`,
          [addressId, userId, body.mode, persona, body.enabled ?? current.enabled, domainId, fromAddress, at],
        )
        return toAgentConfig(row!)
      })

      const draft = Effect.fn("AgentConfigs.draft")(function*(userId: number, addressId: number, body: DraftBody) {
        const subject = body.subject ?? ""
        const text = body.text_body ?? ""
        if (subject.trim() === "" && text.trim() === "") {
          return yield* new ValidationError({
            message: "subject or text_body is required",
            issues: [
              { field: "subject", code: "VALIDATION_ERROR", message: "give a subject or a text_body (at least one must not be empty)" },
              { field: "text_body", code: "VALIDATION_ERROR", message: "give a subject or a text_body (at least one must not be empty)" },
            ],
          })
        }
        const box = yield* mailbox(userId, addressId)
        const row = yield* stored(addressId)
        return yield* ai.complete(replyPrompt({ persona: row?.persona ?? null, mailbox: box.email }, [], { kind: "inbound", subject, body: text }))
      })

      const draftPage = newestFirst<AgentDraftRow>(db, "agent_drafts", "address_id")
      const jobPage = newestFirst<AgentJobRow>(db, "agent_jobs", "address_id")

      const drafts = Effect.fn("AgentConfigs.drafts")(function*(userId: number, addressId: number, page: Page) {
        yield* mailbox(userId, addressId)
        const { rows, total } = yield* draftPage(addressId, page)
        return { rows: rows.map(toAgentDraft), total }
      })

      const jobs = Effect.fn("AgentConfigs.jobs")(function*(userId: number, addressId: number, page: Page) {
        yield* mailbox(userId, addressId)
        const { rows, total } = yield* jobPage(addressId, page)
        return { rows: rows.map(toAgentJob), total }
      })

      return AgentConfigs.of({ list, get, put, draft, drafts, jobs })
    }),
  )
}
