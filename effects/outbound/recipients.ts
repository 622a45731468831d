/**
 * Recipients as callers write them: `addr@domain` or `Name <addr@domain>` (DECISIONS.md
 * "Outbound"). nodemailer's addressparser reads the display name (quotes, escapes, commas
 * inside quotes); the address is kept as written and compared lowercase (suppressions,
 * duplicates), the display name only goes into the To/Cc headers.
 */
import addressparser from "nodemailer/lib/addressparser"
import type { MailAddress } from "../ports/OutboundMailer.ts"
import { EMAIL_PATTERN } from "../shared/schema.ts"

// No line breaks or other control characters: they would end the header line.
const CONTROL = /[\u0000-\u001f\u007f]/

/** The parsed recipient, or undefined when it is neither form. */
export const parseRecipient = (input: string): MailAddress | undefined => {
  const text = input.trim()
  if (text.length === 0 || text.length > 512 || CONTROL.test(text)) return undefined
  const parsed = addressparser(text, { flatten: false })
  const mailbox = parsed[0]
  // One mailbox per entry: a list (`a@x, b@y`) or a group (`team: a@x;`) is not one recipient.
  if (parsed.length !== 1 || mailbox === undefined || "group" in mailbox) return undefined
  const { address: email, name } = mailbox
  // addressparser repairs what it can (`Asha <asha@x` reads as closed, text after `>` joins the
  // name); only the two written forms are taken, so the address must stand as written.
  if (text !== email && !text.endsWith(`<${email}>`)) return undefined
  if (email.length > 254 || !EMAIL_PATTERN.test(email)) return undefined
  const displayName = name.trim()
  return displayName ? { email, name: displayName } : { email }
}

export const isRecipient = (input: string): boolean => parseRecipient(input) !== undefined

export const normalizedEmail = (email: string): string => email.toLowerCase()
