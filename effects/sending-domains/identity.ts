/**
 * Contract between sending domains and outbound: who a message may be sent as (SPEC.md
 * "From rules", DECISIONS.md "Response shapes"). Implemented by the SendingDomains capability;
 * outbound and the agent only call `senderIdentity`.
 */
import { Context, type Effect, Layer, type Option } from "effect"
import type { Forbidden, NotFound, ValidationError } from "../errors.ts"
import type { DbError } from "../ports/Database.ts"
import { makeSenderIdentities } from "./identity-rules.ts"

export interface DkimKey {
  readonly domainName: string
  /** Always `mail` (DECISIONS.md "Domains"). */
  readonly keySelector: string
  /** PKCS#8 PEM, decrypted for this send only. */
  readonly privateKey: string
}

export interface SenderIdentity {
  /** The full From address, e.g. `noreply@example.co.tz` or `billing@inbox.localhost`. */
  readonly from: string
  /** The verified sending domain used, or null for the platform domain. */
  readonly domainId: number | null
  /** Present for verified own domains: the message is DKIM-signed with it. */
  readonly dkim: Option.Option<DkimKey>
}

export interface SenderIdentitiesShape {
  /**
   * Resolves the From of a send:
   * - with `from_domain_id`: the caller's domain (404 unknown, 403 another account's), verified
   *   (403 FORBIDDEN when pending or suspended); `from_address` omitted → the domain's default
   *   local part; else it must be the default local part or a recorded sender on that domain
   *   (400 VALIDATION_ERROR, field `from_address`).
   * - without: the platform sender (`noreply@` + platform domain); a `from_address` on the
   *   platform domain customizes the local part (`[a-z0-9-]`); any other domain → 400, field
   *   `from_address`.
   */
  readonly senderIdentity: (
    userId: number,
    request: { readonly from_domain_id?: number | undefined; readonly from_address?: string | undefined },
  ) => Effect.Effect<SenderIdentity, ValidationError | Forbidden | NotFound | DbError>
}

export class SenderIdentities extends Context.Service<SenderIdentities, SenderIdentitiesShape>()("app/SenderIdentities") {
  /** The live rules (./identity-rules.ts); needs Database and AppConfig. */
  static readonly layer = Layer.effect(SenderIdentities, makeSenderIdentities)
}
