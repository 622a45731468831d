/**
 * Reading what came back to a return path: an RFC 3464 delivery status notification (Gmail,
 * Outlook/Office 365, Postfix, Sendmail … send `multipart/report` with a `message/delivery-status`
 * part), an RFC 5965 abuse report (ARF, `message/feedback-report`: a spam complaint from a
 * feedback loop), or a plain-text notice (text.ts). Anything else (an out-of-office reply sent to
 * the return path, a success notice, junk) is unrecognised and changes nothing.
 */
import { Effect } from "effect"
import { loadOnce } from "../shared/load-once.ts"
import { smtpStatus } from "../outbound/events.ts"
import { addressOf, diagnosticOf, type FieldBlock, fieldBlocks } from "./fields.ts"
import { looksLikeBounce, readTextBounce } from "./text.ts"

/** One recipient's status in a report. */
export interface RecipientStatus {
  readonly recipient: string | null
  readonly originalRecipient: string | null
  /** `failed`, `delayed`, `delivered`, `relayed`, `expanded` (RFC 3464), lowercase. */
  readonly action: string | null
  /** The enhanced status code (`5.1.1`). */
  readonly status: string | null
  /** The basic reply code from the diagnostic (`550`). */
  readonly code: number | null
  readonly diagnostic: string | null
}

export type BounceReport =
  | { readonly _tag: "Delivery"; readonly format: "dsn" | "text"; readonly recipients: ReadonlyArray<RecipientStatus> }
  | {
    readonly _tag: "Complaint"
    /** `abuse`, `fraud`, `virus`, `other`, `not-spam` … (RFC 5965 Feedback-Type), lowercase. */
    readonly feedbackType: string
    readonly userAgent: string | null
    readonly originalRcptTo: string | null
  }
  | { readonly _tag: "Unrecognised"; readonly reason: string }

const STATUS = /^([245])\.(\d{1,3})\.(\d{1,3})$/

const basicCode = (diagnostic: string | null): number | null => {
  const m = /(?<!\d)([245]\d\d)(?!\d)/.exec(diagnostic ?? "")
  return m ? Number(m[1]) : null
}

const recipientStatus = (block: FieldBlock): RecipientStatus => {
  const diagnostic = diagnosticOf(block.get("diagnostic-code"))
  const rawStatus = (block.get("status") ?? "").split(/[\s(]/)[0]!
  return {
    recipient: addressOf(block.get("final-recipient")),
    originalRecipient: addressOf(block.get("original-recipient")),
    action: block.get("action")?.split(/[\s(]/)[0]!.toLowerCase() ?? null,
    status: STATUS.test(rawStatus) ? rawStatus : null,
    code: basicCode(diagnostic),
    diagnostic,
  }
}

const isRecipientBlock = (b: FieldBlock) => b.has("final-recipient") || b.has("action") || b.has("status")

/** Loaded with the first report read: see ../shared/load-once.ts. */
const mailparser = loadOnce(() => import("mailparser"))

const parse = (raw: Uint8Array) =>
  Effect.tryPromise(() =>
    mailparser().then(({ simpleParser }) =>
      simpleParser(Buffer.from(raw), {
        // message/delivery-status stays a part of its own instead of being folded into the text.
        keepDeliveryStatus: true,
        skipHtmlToText: true,
        skipTextToHtml: true,
        skipImageLinks: true,
      } as Parameters<typeof simpleParser>[1])
    )
  )

/** Reads `raw` (the whole message as received) into a report. Never fails. */
export const readReport = (raw: Uint8Array): Effect.Effect<BounceReport> =>
  Effect.gen(function*() {
    const parsed = yield* Effect.result(parse(raw))
    if (parsed._tag === "Failure") return { _tag: "Unrecognised", reason: "the message could not be parsed" } as const
    const mail = parsed.success
    const partsOf = (type: string) => mail.attachments.filter((a) => a.contentType.toLowerCase() === type)

    const feedback = partsOf("message/feedback-report").flatMap((a) => fieldBlocks(a.content.toString("utf8")))[0]
    if (feedback?.has("feedback-type")) {
      return {
        _tag: "Complaint",
        feedbackType: feedback.get("feedback-type")!.trim().toLowerCase(),
        userAgent: feedback.get("user-agent") ?? null,
        originalRcptTo: addressOf(feedback.get("original-rcpt-to")),
      } as const
    }

    const statuses = [...partsOf("message/delivery-status"), ...partsOf("message/global-delivery-status")]
      .flatMap((a) => fieldBlocks(a.content.toString("utf8")))
      .filter(isRecipientBlock)
      .map(recipientStatus)
    if (statuses.length > 0) return { _tag: "Delivery", format: "dsn", recipients: statuses } as const

    const from = mail.from?.value.map((a) => `${a.name} <${a.address ?? ""}>`).join(", ") ?? ""
    const failedRecipients = mail.headers.get("x-failed-recipients")
    if (!looksLikeBounce({ from, subject: mail.subject ?? "", failedRecipients: failedRecipients !== undefined })) {
      return { _tag: "Unrecognised", reason: "not a delivery report or abuse report" } as const
    }
    const text = readTextBounce(mail.text ?? "")
    if (!text) return { _tag: "Unrecognised", reason: "a delivery notice that names no failure or delay" } as const
    const named = addressOf(String(failedRecipients ?? "").split(",")[0])
    return {
      _tag: "Delivery",
      format: "text",
      recipients: [{ recipient: named, originalRecipient: null, ...text }],
    } as const
  })

/** What a report says about one recipient of an outbound message. */
export interface Verdict {
  readonly type: "bounced" | "deferred" | "complained"
  /** The enhanced status code when known, else the basic reply code, else null. */
  readonly smtpCode: string | null
  /** The basic reply code, for the suppression list. */
  readonly code: number | null
  readonly diagnostic: string | null
}

const classOf = (s: RecipientStatus): "2" | "4" | "5" | null => {
  if (s.status) return s.status[0] as "2" | "4" | "5"
  if (s.code) return String(s.code)[0] as "2" | "4" | "5"
  if (s.action === "failed") return "5"
  if (s.action === "delayed") return "4"
  if (s.action === "delivered" || s.action === "relayed" || s.action === "expanded") return "2"
  return null
}

/**
 * The verdict for `recipient` (the address the VERP return path names): a 5.x.x status is a
 * bounce, 4.x.x a delay, an abuse report a complaint. A report about other recipients only is
 * read for the block that matches, else for its first failure or delay.
 */
export const verdictFor = (report: BounceReport, recipient: string): Verdict | { readonly ignored: string } => {
  if (report._tag === "Unrecognised") return { ignored: report.reason }
  if (report._tag === "Complaint") {
    if (report.feedbackType === "not-spam") return { ignored: "a not-spam report" }
    return {
      type: "complained",
      smtpCode: null,
      code: null,
      diagnostic: `feedback-type: ${report.feedbackType}${report.userAgent ? `; user-agent: ${report.userAgent}` : ""}`,
    }
  }
  const target = recipient.toLowerCase()
  const mine = report.recipients.find((r) => r.recipient?.toLowerCase() === target || r.originalRecipient?.toLowerCase() === target)
  const chosen = mine ?? report.recipients.find((r) => classOf(r) === "5" || classOf(r) === "4")
  if (!chosen) return { ignored: "the report names no failure or delay" }
  const cls = classOf(chosen)
  if (cls !== "5" && cls !== "4") return { ignored: `the report says ${chosen.action ?? "nothing"} for this recipient` }
  return {
    type: cls === "5" ? "bounced" : "deferred",
    smtpCode: chosen.status ?? smtpStatus(chosen.diagnostic, chosen.code),
    code: chosen.code,
    diagnostic: chosen.diagnostic,
  }
}
