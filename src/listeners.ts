/**
 * Socket servers besides HTTP (the MX and sandbox SMTP servers). Each opens on start and closes
 * gracefully on stop; tests pass port 0 through the settings.
 */
import type { Settings } from "../effects/config.ts"
import { mxListener } from "./smtp/mx.ts"
import { sandboxListener, sandboxSmtpsListener } from "./smtp/sandbox.ts"
import type { AppRuntime } from "./layers.ts"

export interface Listener {
  readonly name: string
  readonly start: (
    runtime: AppRuntime,
    settings: Settings,
  ) => Promise<{ readonly port: number; readonly close: () => Promise<void> }>
}

export const listeners: ReadonlyArray<Listener> = [
  mxListener,
  sandboxListener,
  sandboxSmtpsListener,
]
