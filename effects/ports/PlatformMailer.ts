/**
 * The platform's own mail to its users (verification links, later notices), sent from
 * PLATFORM_FROM. Not customer mail: outbound sends go through their own port. Adapters:
 * src/providers/platform-mailer.ts (SMTP relay via nodemailer, or the log when unconfigured).
 */
import { Context, type Effect } from "effect"
import type { ProviderError } from "../errors.ts"

export interface PlatformMail {
  readonly to: string
  readonly subject: string
  readonly text: string
  readonly html?: string
}

export interface PlatformMailerShape {
  /** Hands the mail to the relay; PROVIDER_ERROR when the relay refuses or cannot be reached. */
  readonly send: (mail: PlatformMail) => Effect.Effect<void, ProviderError>
}

export class PlatformMailer extends Context.Service<PlatformMailer, PlatformMailerShape>()("app/PlatformMailer") {}
