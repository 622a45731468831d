/**
 * Contract of the outbound send for other capabilities (the AI agent's auto-replies): the same
 * path as POST /api/outbound/emails — sender identity, suppression, charge before dispatch,
 * refund on provider failure — without the HTTP layer. Implemented by the outbound capability.
 */
import { Context, type Effect } from "effect"
import type {
  Forbidden,
  InsufficientBalance,
  NotFound,
  ProviderError,
  RateLimited,
  Suppressed,
  ValidationError,
} from "../errors.ts"
import type { DbError } from "../ports/Database.ts"

export interface SendRequest {
  readonly to: ReadonlyArray<string>
  readonly cc?: ReadonlyArray<string>
  readonly bcc?: ReadonlyArray<string>
  readonly subject?: string
  readonly text_body?: string
  readonly html_body?: string
  readonly from_domain_id?: number
  readonly from_address?: string
  /** Extra headers (the agent sets In-Reply-To, References, Auto-Submitted). */
  readonly headers?: Readonly<Record<string, string>>
}

export interface SentMessage {
  readonly id: number
  readonly status: "sent" | "failed"
  readonly amount_tzs: number
}

export interface OutboundSenderShape {
  readonly send: (
    userId: number,
    request: SendRequest,
  ) => Effect.Effect<
    SentMessage,
    ValidationError | Suppressed | InsufficientBalance | Forbidden | NotFound | RateLimited | ProviderError | DbError
  >
}

export class OutboundSender extends Context.Service<OutboundSender, OutboundSenderShape>()("app/OutboundSender") {}
