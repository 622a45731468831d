/**
 * An SMTP answer as smtp-server takes it from a handler: an Error whose `responseCode` it writes
 * before the message. Free of Effect, so the MX's protocol thread (./mx-thread.ts) loads only
 * what it runs.
 */
export interface SmtpAnswer {
  readonly code: number
  readonly message: string
}

export const smtpError = (r: SmtpAnswer) => Object.assign(new Error(r.message), { responseCode: r.code })
