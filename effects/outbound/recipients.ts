/**
 * Recipients as callers write them: `addr@domain` or `Name <addr@domain>` (DECISIONS.md
 * "Outbound"). Parsed once here; the address is kept as written and compared lowercase
 * (suppressions, duplicates), the display name only goes into the To/Cc headers.
 */
import type { MailAddress } from "../ports/OutboundMailer.ts"
import { EMAIL_PATTERN } from "../shared/schema.ts"

const NAMED = /^(.*?)\s*<([^<>]*)>$/
// No line breaks or other control characters: they would end the header line.
const CONTROL = /[\u0000-\u001f\u007f]/

/** The parsed recipient, or undefined when it is neither form. */
export const parseRecipient = (input: string): MailAddress | undefined => {
  const text = input.trim()
  if (text.length === 0 || text.length > 512 || CONTROL.test(text)) return undefined
  const named = NAMED.exec(text)
  const email = (named ? named[2]! : text).trim()
  if (email.length > 254 || !EMAIL_PATTERN.test(email)) return undefined
  const rawName = named?.[1]?.trim().replace(/^"(.*)"$/, "$1").trim()
  return rawName ? { email, name: rawName } : { email }
}

export const isRecipient = (input: string): boolean => parseRecipient(input) !== undefined

export const normalizedEmail = (email: string): string => email.toLowerCase()
