/** The response envelope of every endpoint (SPEC.md "Response envelope"). */
import type { FieldIssue } from "../../effects/errors.ts"
import type { Pagination } from "../../effects/shared/schema.ts"

export interface Envelope {
  readonly success: boolean
  readonly message?: string
  readonly data?: unknown
  readonly errors?: ReadonlyArray<FieldIssue>
  readonly pagination?: Pagination | null
  readonly request_id: string
  readonly timestamp: string
}

export const envelope = (
  requestId: string,
  body: Omit<Envelope, "request_id" | "timestamp">,
  now: Date = new Date(),
): Envelope => ({ ...body, request_id: requestId, timestamp: now.toISOString() })
