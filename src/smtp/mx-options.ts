/**
 * The MX's smtp-server options, for the MX on the event loop (./mx.ts) and on its thread
 * (./mx-threaded.ts, which hands the plain ones to the thread as they are).
 */
import type { SMTPServerOptions } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import { protocolOptions } from "./server.ts"
import type { SmtpTls } from "./tls.ts"

/** The MX's smtp-server options that are plain values: no handlers, no certificate. */
export const mxPlainOptions = (settings: Settings, tlsEnabled: boolean) => ({
  name: settings.mxHost,
  banner: "inbound mail",
  disabledCommands: tlsEnabled ? ["AUTH"] : ["AUTH", "STARTTLS"],
  ...protocolOptions(settings),
}) satisfies SMTPServerOptions

/** The MX's smtp-server options, apart from its handlers. */
export const mxServerOptions = (settings: Settings, tls: SmtpTls): SMTPServerOptions => ({
  ...mxPlainOptions(settings, tls.enabled),
  ...tls.options,
})
