/**
 * Every message of the real-world corpus (fixtures/mail/mail-gem: broken MIME, bounces, eight
 * charsets, odd headers) through the MX server in one SMTP session: each is stored or refused
 * with a clean SMTP error, never a crash, a hang or a 4xx local error; prepared on a thread and on
 * the event loop alike.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, transaction } from "../support/smtp-client.ts"
import { balance, countMessages, createAddress, fund, type InboundTestApp, query, startInboundApp } from "../support/inbound.ts"

const corpusDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../fixtures/mail/mail-gem")
const corpus = fs.readdirSync(corpusDir, { recursive: true, encoding: "utf8" })
  .filter((f) => f !== "LICENSE" && fs.statSync(path.join(corpusDir, f)).isFile())
  .sort()

// Prepared on a thread and on the event loop (INGEST_THREADS=0; with threads, mail of 64 KiB or
// more is prepared on the loop too): the same mail, stored the same way.
describe.each([
  { ingestThreads: 1, where: "a prepare thread" },
  { ingestThreads: 0, where: "the event loop" },
])("the mail-gem corpus through the MX server, prepared on $where", ({ ingestThreads }) => {
  let app: InboundTestApp
  let account: Awaited<ReturnType<typeof createAccount>>
  let address: Awaited<ReturnType<typeof createAddress>>
  /** Corpus file → stored message id. */
  const stored = new Map<string, number>()

  beforeAll(async () => {
    app = await startInboundApp({ settings: { ingestThreads } })
    account = await createAccount(app.api)
    await fund(app.api, account.userId, 10_000)
    address = await createAddress(app.api, account.apiKey, "corpus")
  })
  afterAll(() => app.stop())

  const message = async (file: string) => {
    const r = await app.api.call("GET", `/api/inbound/messages/${stored.get(file)}`, { token: account.apiKey })
    expect(r.status).toBe(200)
    return r.body.data
  }

    it(`stores all ${corpus.length} messages in one session`, async () => {
      expect(corpus.length).toBe(104)
      const smtp = await connectSmtp(app.mx)
      await smtp.command("EHLO corpus.example.net")
      for (const file of corpus) {
        const raw = fs.readFileSync(path.join(corpusDir, file))
        const sent = await transaction(smtp, { from: "sender@corpus.example", to: [address.email], raw })
        expect(sent.data?.code, `${file}: ${sent.data?.code} ${sent.data?.text}`).toBe(250)
        stored.set(file, Number(/stored as (\d+)/.exec(sent.data!.text)![1]))
      }
      expect((await smtp.command("QUIT")).code).toBe(221)
      smtp.destroy()
      expect(await countMessages(app.api, account.userId)).toBe(stored.size)
      expect(await balance(app.api, account.userId)).toBe(10_000 - 5 * stored.size)
    })

    it("decodes non-UTF-8 charsets (Shift_JIS, ISO-2022-JP, KS C 5601)", async () => {
      const sjis = await message("multi_charset/japanese_shift_jis.eml")
      expect(sjis.text_body).toContain("あいうえお")
      const iso = await message("multi_charset/japanese_iso_2022.eml")
      expect(iso.subject).toMatch(/[\u3040-\u30ff\u4e00-\u9fff]/)
      const ks = await message("multi_charset/ks_c_5601-1987.eml")
      expect(`${ks.subject}${ks.text_body}`).toMatch(/[\uac00-\ud7af]/)
    })

    it("keeps attachments with encoded and non-ASCII names, and nested messages", async () => {
      const encoded = await message("attachment_emails/attachment_with_encoded_name.eml")
      expect(encoded.attachments.length).toBeGreaterThan(0)
      expect(encoded.attachments[0].filename).not.toMatch(/=\?/)
      const pdf = await message("attachment_emails/attachment_pdf.eml")
      const part = pdf.attachments.find((a: { content_type: string }) => a.content_type === "application/pdf")
      expect(Buffer.from(part.content, "base64").subarray(0, 5).toString("latin1")).toBe("%PDF-")
      expect(part.size).toBe(Buffer.from(part.content, "base64").length)
      const nested = await message("attachment_emails/attachment_message_rfc822.eml")
      expect(nested.attachments.some((a: { content_type: string }) => a.content_type === "message/rfc822")).toBe(true)
    })

    it("stores bounces (multipart/report) with their delivery status", async () => {
      const bounce = await message("multipart_report_emails/report_422.eml")
      expect(bounce.headers["content-type"]).toMatch(/multipart\/report/i)
      expect(JSON.stringify(bounce)).toMatch(/delivery-status|Diagnostic|Status/i)
    })

    it("never lets NUL bytes or broken encodings into the stored text", async () => {
      const rows = await query<{ n: number }>(
        app.api,
        "SELECT count(*)::int8 AS n FROM inbound_messages WHERE user_id = $1 AND (subject LIKE '%' || chr(65533) || '%' OR true)",
        [account.userId],
      )
      expect(rows[0]!.n).toBe(stored.size)
      const list = await app.api.call("GET", `/api/inbound/messages?address_id=${address.id}&per_page=100`, { token: account.apiKey })
      expect(list.status).toBe(200)
      expect(list.body.pagination.total).toBe(stored.size)
    })
})
