/**
 * The skip rules and thread helpers on real headers: mail-gem bounces, lists and junk, and
 * realistic newsletter / Exchange fixtures (test/agent/mail/), parsed by the ingest parser so the
 * rules see exactly the header map ingest stores. Each rule is also shown alone on a plain mail.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { addressOf, replySubject, replyTo, type RuleInput, skipReason, threadingHeaders, threadKey } from "../../effects/agent/rules.ts"
import { parseMessage } from "../../effects/ingest/parse.ts"
import { mail, mailFixture } from "./support.ts"

const here = path.dirname(fileURLToPath(import.meta.url))

const parsed = (raw: Buffer | string, envelopeFrom = "someone@sender.example", toAddr = "shop@inbox.localhost"): Promise<RuleInput> =>
  Effect.runPromise(parseMessage(typeof raw === "string" ? Buffer.from(raw) : raw)).then((p) => ({
    fromAddr: p.from || envelopeFrom,
    toAddr,
    envelopeFrom,
    headers: p.headers,
  }))

const local = (name: string) => fs.readFileSync(path.join(here, "mail", name))

describe("skip rules on real mail", () => {
  it.each([
    ["a Postfix bounce (MAILER-DAEMON, multipart/report)", "mail-gem/multipart_report_emails/multi_address_bounce1.eml", "MAILER-DAEMON sender"],
    ["a sendmail delay warning", "mail-gem/multipart_report_emails/report_422.eml", "MAILER-DAEMON sender"],
    ["a bounce with the null Return-Path", "mail-gem/mime_emails/raw_email_with_mimepart_without_content_type.eml", "null sender (a bounce or notification)"],
    ["a mailing list post", "mail-gem/error_emails/empty_in_reply_to.eml", "mailing list (List-Id)"],
    ["junk", "mail-gem/error_emails/bad_date_header.eml", "Precedence: junk"],
  ])("skips %s", async (_, file, reason) => {
    expect(skipReason(await parsed(mailFixture(file)))).toBe(reason)
  })

  it("skips a bounce by its null envelope sender even when the headers look personal", async () => {
    expect(skipReason(await parsed(mail({ to: "shop@inbox.localhost" }), ""))).toBe("null sender (a bounce or notification)")
  })

  it.each([
    ["a Mailchimp newsletter", "newsletter.eml", "bulk sender (List-Unsubscribe)"],
    ["an Exchange out-of-office", "out-of-office.eml", "Auto-Submitted: auto-generated"],
    ["an Exchange meeting request", "meeting-request.eml", "the sender asked for no automatic replies (X-Auto-Response-Suppress)"],
    ["a Mailman list post", "mailing-list.eml", "mailing list (List-Id)"],
  ])("skips %s", async (_, file, reason) => {
    expect(skipReason(await parsed(local(file)))).toBe(reason)
  })

  it.each([
    "mail-gem/plain_emails/basic_email.eml",
    "mail-gem/plain_emails/raw_email_reply.eml",
    "mail-gem/rfc2822/example01.eml",
  ])("answers a person's mail (%s)", async (file) => {
    expect(skipReason(await parsed(mailFixture(file)))).toBeUndefined()
  })
})

describe("each rule alone", () => {
  const plain = (...headers: Array<string>) => mail({ to: "shop@inbox.localhost", headers })

  it.each([
    [["Auto-Submitted: auto-replied"], "Auto-Submitted: auto-replied"],
    [["Auto-Submitted: auto-generated (warning-timeout)"], "Auto-Submitted: auto-generated"],
    [["Auto-Submitted: auto-notified; owner-email=\"x@y.example\""], "Auto-Submitted: auto-notified"],
    [["Precedence: bulk"], "Precedence: bulk"],
    [["Precedence: List"], "Precedence: list"],
    [["Precedence: junk"], "Precedence: junk"],
    [["Precedence: auto_reply"], "Precedence: auto_reply"],
    [["List-Id: <news.sender.example>"], "mailing list (List-Id)"],
    [["List-Unsubscribe: <mailto:leave@sender.example>"], "bulk sender (List-Unsubscribe)"],
    [["X-Auto-Response-Suppress: OOF"], "the sender asked for no automatic replies (X-Auto-Response-Suppress)"],
    [["X-Autoreply: yes"], "auto-responder (X-Autoreply)"],
  ])("%j", async (headers, reason) => {
    expect(skipReason(await parsed(plain(...headers)))).toBe(reason)
  })

  it("multipart/report without any other marker", async () => {
    const raw = mail({ to: "shop@inbox.localhost" }).replace(
      "Content-Type: text/plain; charset=utf-8",
      "Content-Type: multipart/report; report-type=disposition-notification; boundary=\"b1\"",
    ).replace("Habari, are you open on Saturday?", "--b1\r\nContent-Type: text/plain\r\n\r\nRead receipt\r\n--b1--")
    expect(skipReason(await parsed(raw))).toBe("delivery or read report (multipart/report)")
  })

  it("MAILER-DAEMON in the From or the envelope, in any case", async () => {
    expect(skipReason(await parsed(mail({ to: "shop@inbox.localhost", from: "Mail Delivery System <Mailer-Daemon@mx.sender.example>" })))).toBe("MAILER-DAEMON sender")
    expect(skipReason(await parsed(plain(), "MAILER-DAEMON@mx.sender.example"))).toBe("MAILER-DAEMON sender")
  })

  it("answers Auto-Submitted: no, Precedence: first-class, and mail from this very address is not answered", async () => {
    expect(skipReason(await parsed(plain("Auto-Submitted: no")))).toBeUndefined()
    expect(skipReason(await parsed(plain("Precedence: first-class")))).toBeUndefined()
    expect(skipReason(await parsed(mail({ to: "x", from: "Shop <SHOP@inbox.localhost>" })))).toBe("sent from this address itself")
  })

  it("no sender address at all", async () => {
    expect(skipReason({ fromAddr: "undisclosed-recipients:;", toAddr: "shop@inbox.localhost", envelopeFrom: "x@y.example", headers: {} }))
      .toBe("no sender address to reply to")
  })
})

describe("threads and reply headers", () => {
  it("names a thread by the subject without reply/forward prefixes", () => {
    expect(threadKey("Opening hours")).toBe("opening hours")
    expect(threadKey("Re: Opening  hours")).toBe("opening hours")
    expect(threadKey("RE: Fwd: AW: re[2]: Opening hours ")).toBe("opening hours")
    expect(threadKey("Fw: opening HOURS")).toBe("opening hours")
    expect(threadKey("Reply needed")).toBe("reply needed")
  })

  it("prefixes Re: once", () => {
    expect(replySubject("Opening hours")).toBe("Re: Opening hours")
    expect(replySubject("RE: Opening hours")).toBe("RE: Opening hours")
    expect(replySubject("  ")).toBe("Re: (no subject)")
  })

  it("finds the address in every From shape", () => {
    expect(addressOf("\"Mushi, Asha\" <Asha@Sender.Example>")).toBe("asha@sender.example")
    expect(addressOf("asha@sender.example (Asha)")).toBe("asha@sender.example")
    expect(addressOf("Asha <asha@sender.example>, Juma <juma@sender.example>")).toBe("asha@sender.example")
    expect(addressOf("")).toBeUndefined()
  })

  it("replies to Reply-To when there is one", async () => {
    expect(replyTo(await parsed(mail({ to: "shop@inbox.localhost", headers: ["Reply-To: Orders <orders@sender.example>"] })))).toBe("orders@sender.example")
    expect(replyTo(await parsed(mail({ to: "shop@inbox.localhost" })))).toBe("asha@sender.example")
  })

  it("threads the reply after the message: In-Reply-To its id, References the chain plus its id", async () => {
    const reply = await parsed(mailFixture("mail-gem/plain_emails/raw_email_reply.eml"))
    expect(threadingHeaders(reply.headers, null)).toEqual({
      "In-Reply-To": "<473FFE27.20003@xxx.org>",
      References: "<473FF3B8.9020707@xxx.org> <348F04F142D69C21-291E56D292BC@xxxx.net> <473FFE27.20003@xxx.org>",
    })
    const first = await parsed(mail({ to: "shop@inbox.localhost", messageId: "<first@sender.example>" }))
    expect(threadingHeaders(first.headers, "first@sender.example")).toEqual({ "In-Reply-To": "<first@sender.example>", References: "<first@sender.example>" })
    expect(threadingHeaders({}, null)).toEqual({})
    expect(threadingHeaders({}, "bare@sender.example")).toEqual({ "In-Reply-To": "<bare@sender.example>", References: "<bare@sender.example>" })
    // A long chain keeps its first and latest ids within one 998-character line.
    const ids = Array.from({ length: 40 }, (_, i) => `<message-${String(i).padStart(2, "0")}-${"x".repeat(20)}@sender.example>`)
    const long = threadingHeaders({ "message-id": "<own@sender.example>", references: ids.join(" ") }, null)
    expect(long.References!.length).toBeLessThanOrEqual(998)
    expect(long.References!.startsWith(ids[0]!)).toBe(true)
    expect(long.References!.endsWith(`${ids[39]} <own@sender.example>`)).toBe(true)
  })
})
