/**
 * The headers every webhook request carries (SPEC.md "Webhook deliveries", DECISIONS.md
 * "Webhooks"): both hex signatures of the raw body, and the Standard Webhooks trio so receivers
 * can use standard libraries and reject replays. All HMACs are keyed with the UTF-8 bytes of the
 * webhook secret exactly as shown at creation (Standard Webhooks libraries: `format: "raw"`).
 */
import { Effect } from "effect"
import { hmacSha256, hmacSha256Hex, toBase64 } from "../shared/crypto.ts"

export const SERVICE_NAME = "TzMail"
export const USER_AGENT = `${SERVICE_NAME}-Webhook/1.0`

export interface SigningInput {
  readonly secret: string
  /** `webhook-id`: the delivery id, the same on every retry. */
  readonly id: string
  /** `webhook-timestamp`: Unix seconds of this attempt. */
  readonly timestamp: number
  readonly body: string
}

export const signedHeaders = (input: SigningInput): Effect.Effect<Record<string, string>> =>
  Effect.gen(function*() {
    const hex = yield* hmacSha256Hex(input.secret, input.body)
    const standard = toBase64(yield* hmacSha256(input.secret, `${input.id}.${input.timestamp}.${input.body}`))
    return {
      "content-type": "application/json",
      "user-agent": USER_AGENT,
      "x-signature": hex,
      "x-webhook-signature": hex,
      "webhook-id": input.id,
      "webhook-timestamp": String(input.timestamp),
      "webhook-signature": `v1,${standard}`,
    }
  })
