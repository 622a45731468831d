/**
 * Reading what comes back to a return path, on real-format reports (fixtures/mail/bounces and the
 * mail-gem corpus): RFC 3464 DSNs from Gmail, Outlook/Office 365, Postfix and Sendmail, the
 * plain-text notices of Yahoo, Exim and Gmail's older format, an ARF abuse report (RFC 5965),
 * and what must change nothing (an out-of-office reply, a success DSN, ordinary mail, junk).
 */
import { Effect } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { readReport, verdictFor } from "../../effects/bounces/report.ts"

const fixture = (name: string) => fs.readFileSync(path.join("fixtures/mail/bounces", name))
const corpus = (name: string) => fs.readFileSync(path.join("fixtures/mail/mail-gem", name))

const verdict = (raw: Uint8Array, recipient: string) =>
  Effect.runPromise(Effect.map(readReport(raw), (report) => ({ report, verdict: verdictFor(report, recipient) })))

describe("delivery status notifications (RFC 3464)", () => {
  it("Gmail: 5.1.1 address not found is a bounce, with the folded diagnostic unfolded", async () => {
    const { report, verdict: v } = await verdict(fixture("gmail-dsn-5.1.1.eml"), "Juma.Hamisi.8842@gmail.com")
    expect(report).toMatchObject({ _tag: "Delivery", format: "dsn" })
    expect(v).toMatchObject({ type: "bounced", smtpCode: "5.1.1", code: 550 })
    expect((v as { diagnostic: string }).diagnostic).toMatch(/^550-5\.1\.1 The email account that you tried to reach does not exist\. .* - gsmtp$/)
  })

  it("Outlook / Office 365: 5.1.10 RecipientNotFound is a bounce", async () => {
    const { verdict: v } = await verdict(fixture("outlook-ndr-5.1.10.eml"), "baraka.mollel@outlook.com")
    expect(v).toEqual({
      type: "bounced",
      smtpCode: "5.1.10",
      code: 550,
      diagnostic: "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient baraka.mollel@outlook.com not found by SMTP address lookup",
    })
  })

  it("Postfix: the X-Postfix diagnostic, continuation lines included", async () => {
    const { verdict: v } = await verdict(fixture("postfix-dsn-5.1.1.eml"), "zawadi@kilimanjaro-lodge.co.tz")
    expect(v).toEqual({
      type: "bounced",
      smtpCode: "5.1.1",
      code: 550,
      diagnostic: "user unknown: 550 5.1.1 <zawadi@kilimanjaro-lodge.co.tz>: Recipient address rejected: User unknown in virtual mailbox table",
    })
  })

  it("Postfix with several recipients: the block of the return path's recipient is the one read", async () => {
    const { report, verdict: v } = await verdict(corpus("multipart_report_emails/multi_address_bounce1.eml"), "egyfefsdvsfvvhjsd@gmail.com")
    expect(report._tag === "Delivery" && report.recipients.length).toBe(5)
    expect(v).toMatchObject({ type: "bounced", smtpCode: "5.1.1", code: 550 })
  })

  it("Sendmail: a 4.2.2 'mailbox full' warning is a delay, not a bounce", async () => {
    const { verdict: v } = await verdict(corpus("multipart_report_emails/report_422.eml"), "fraser@oooooooo.com.au")
    expect(v).toMatchObject({ type: "deferred", smtpCode: "4.2.2", code: 452 })
  })

  it("Sendmail: a permanent failure whose diagnostic code differs from its status keeps the status", async () => {
    const { verdict: v } = await verdict(corpus("multipart_report_emails/report_530.eml"), "edwin@zzzzzzz.com")
    expect(v).toMatchObject({ type: "bounced", smtpCode: "5.3.0", code: 553 })
  })

  it("a report with a junk status part and a real one (InterMail) reads the real one", async () => {
    const { verdict: v } = await verdict(corpus("multipart_report_emails/multipart_report_multiple_status.eml"), "u@ci.com")
    expect(v).toEqual({ type: "bounced", smtpCode: "5.3.0", code: null, diagnostic: null })
  })

  it("a recipient the report does not name is judged by the report's first failure", async () => {
    const { verdict: v } = await verdict(fixture("gmail-dsn-5.1.1.eml"), "someone.else@example.co.tz")
    expect(v).toMatchObject({ type: "bounced", smtpCode: "5.1.1" })
  })

  it("a success DSN (Action: delivered, 2.0.0) changes nothing", async () => {
    const { verdict: v } = await verdict(fixture("dsn-delivered-2.0.0.eml"), "salma@example.co.tz")
    expect(v).toEqual({ ignored: "the report says delivered for this recipient" })
    // Nor for a recipient it does not name.
    expect((await verdict(fixture("dsn-delivered-2.0.0.eml"), "x@example.co.tz")).verdict).toEqual({ ignored: "the report names no failure or delay" })
  })
})

describe("plain-text notices", () => {
  it("Yahoo's Failure Notice: 554 delivery error", async () => {
    const { report, verdict: v } = await verdict(fixture("yahoo-failure-notice.eml"), "rehema.juma@yahoo.com")
    expect(report).toMatchObject({ _tag: "Delivery", format: "text" })
    expect(v).toEqual({
      type: "bounced",
      smtpCode: "554",
      code: 554,
      diagnostic: "554: delivery error: dd Not a valid recipient - atlas117.free.mail.ne1.yahoo.com",
    })
  })

  it("Exim: a permanent error after RCPT TO, not the copy of the message below it", async () => {
    const { report, verdict: v } = await verdict(fixture("exim-failed.eml"), "bakari@zanzibar-spice.co.tz")
    expect(report).toMatchObject({ _tag: "Delivery", format: "text", recipients: [{ recipient: "bakari@zanzibar-spice.co.tz" }] })
    expect(v).toEqual({
      type: "bounced",
      smtpCode: "5.2.1",
      code: 550,
      diagnostic: "550 5.2.1 <bakari@zanzibar-spice.co.tz>: Mailbox disabled, not accepting messages",
    })
  })

  it("Exim: a 24-hour delay warning is a delay", async () => {
    const { verdict: v } = await verdict(fixture("exim-delayed.eml"), "mwanaisha@zanzibar-spice.co.tz")
    expect(v).toMatchObject({ type: "deferred", smtpCode: "4.2.2", code: 452 })
  })

  it("Gmail's older text format: the remote server's reply inside the explanation", async () => {
    const { verdict: v } = await verdict(fixture("gmail-legacy-text.eml"), "neema.kweka@example.fr")
    expect(v).toMatchObject({ type: "bounced", smtpCode: "5.1.1", code: 550 })
    expect((v as { diagnostic: string }).diagnostic).toContain("user unknown")
  })
})

describe("abuse reports (ARF, RFC 5965)", () => {
  it("a Yahoo feedback-loop report is a complaint about the recipient", async () => {
    const { report, verdict: v } = await verdict(fixture("arf-yahoo-abuse.eml"), "halima.omari@yahoo.com")
    expect(report).toEqual({
      _tag: "Complaint",
      feedbackType: "abuse",
      userAgent: "Yahoo!-Mail-Feedback/2.0",
      originalRcptTo: "halima.omari@yahoo.com",
    })
    expect(v).toEqual({ type: "complained", smtpCode: null, code: null, diagnostic: "feedback-type: abuse; user-agent: Yahoo!-Mail-Feedback/2.0" })
  })

  it("a not-spam report is no complaint", async () => {
    const raw = fixture("arf-yahoo-abuse.eml").toString("utf8").replace("Feedback-Type: abuse", "Feedback-Type: not-spam")
    const { verdict: v } = await verdict(Buffer.from(raw), "halima.omari@yahoo.com")
    expect(v).toEqual({ ignored: "a not-spam report" })
  })
})

describe("what is not a bounce changes nothing", () => {
  it("an out-of-office reply sent to the return path", async () => {
    const { report, verdict: v } = await verdict(fixture("out-of-office.eml"), "hassani@example.co.tz")
    expect(report._tag).toBe("Unrecognised")
    expect(v).toEqual({ ignored: "not a delivery report or abuse report" })
  })

  it("ordinary mail from the corpus, even with numbers in it", async () => {
    for (const name of ["plain_emails/basic_email.eml", "rfc2822/example01.eml", "attachment_emails/attachment_pdf.eml"]) {
      const { verdict: v } = await verdict(corpus(name), "a@example.com")
      expect(v, name).toHaveProperty("ignored")
    }
  })

  it("a bounce-looking notice that names no failure, delay or code", async () => {
    const raw = "From: MAILER-DAEMON@example.com\r\nSubject: Delivery Status Notification\r\n\r\nHello.\r\n"
    const { verdict: v } = await verdict(Buffer.from(raw), "a@example.com")
    expect(v).toEqual({ ignored: "a delivery notice that names no failure or delay" })
  })

  it("never fails, whatever the bytes", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2000 }), fc.string(), async (bytes, rcpt) => {
        const { report, verdict: v } = await verdict(bytes, rcpt)
        expect(["Delivery", "Complaint", "Unrecognised"]).toContain(report._tag)
        expect(v).toBeTypeOf("object")
      }),
      { numRuns: 150 },
    )
  })
})
