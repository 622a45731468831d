/**
 * The live OutboundSender (contract.ts) for other capabilities, the AI agent's auto-replies
 * first: exactly the path of POST /api/outbound/emails (identity, From rules, rate limit,
 * suppression, charge before dispatch, refunds), without HTTP or an Idempotency-Key.
 */
import { Effect, Layer } from "effect"
import { OutboundSender } from "./contract.ts"
import { Outbound } from "./service.ts"

export const outboundSenderLayer = Layer.effect(
  OutboundSender,
  Effect.gen(function*() {
    const outbound = yield* Outbound
    return OutboundSender.of({
      send: (userId, request) =>
        outbound.send(userId, request).pipe(
          Effect.map(({ data }) => ({ id: data.id, status: data.status === "sent" ? "sent" as const : "failed" as const, amount_tzs: data.amount_tzs })),
          // Conflict comes only from an Idempotency-Key, which this path never passes.
          Effect.catchTag("Conflict", Effect.die),
          Effect.withSpan("OutboundSender.send"),
        ),
    })
  }),
)
