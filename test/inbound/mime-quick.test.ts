/**
 * The quick parse (effects/ingest/mime-quick.ts) against mailparser: for every message it takes,
 * the fields the service stores must be exactly what mailparser's simpleParser gives, over the
 * real-world corpus and over generated mail built to hit its edges (line endings, boundary
 * lines, transfer encodings, charsets, encoded words, folding). It must also take the shapes it
 * exists for, and leave the rest to mailparser.
 *
 * A longer run: QUICK_MIME_RUNS=20000 QUICK_MIME_SEED=$RANDOM npx vitest run test/inbound/mime-quick.test.ts
 */
import fc from "fast-check"
import { simpleParser } from "mailparser"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Readable } from "node:stream"
import { describe, expect, it } from "vitest"
import { parseMail, PARSER_OPTIONS, quickParse } from "../../effects/ingest/mime.ts"
import { makeQuickParser } from "../../effects/ingest/mime-quick.ts"

const RUNS = Number(process.env.QUICK_MIME_RUNS ?? 1000)
const SEED = Number(process.env.QUICK_MIME_SEED ?? 20261127)

const quick = makeQuickParser(PARSER_OPTIONS)

/** The fields of simpleParser's result that the quick parse stands in for. */
const fields = (m: { from?: { value: unknown }; subject?: unknown; messageId?: unknown; text?: unknown; html?: unknown; headerLines?: unknown; attachments: ReadonlyArray<unknown> }) => ({
  // The addresses: mailparser's renderings of them (`html`, `text`) are read by nobody.
  from: m.from?.value,
  subject: m.subject,
  messageId: m.messageId,
  text: m.text,
  html: typeof m.html === "string" ? m.html : undefined,
  headerLines: m.headerLines,
  attachments: m.attachments.length,
})

/**
 * The quick parse, and mailparser's, of one message (`taken`: whether the quick one took it).
 * `ranged`: the bytes the quick parse's `textRange` names, read as UTF-8 with every CR LF made LF
 * (what the database and the readers of a file make of them), to be mailparser's text.
 */
const both = async (raw: Buffer) => {
  const mine = quick(raw)
  const theirs = await simpleParser(raw, PARSER_OPTIONS).then(fields, (e: Error) => ({ error: e.message }))
  const range = mine?.textRange
  const ranged = range && raw.subarray(range[0], range[1]).toString("utf8").replaceAll("\r\n", "\n")
  // Asked to leave a ranged text as bytes: the same result, but for that text's string.
  const unread = quick(raw, { rangedTextUnread: true })
  const { text: _text, ...rest } = mine ?? {}
  expect(unread, "rangedTextUnread").toEqual(range ? rest : mine)
  return { taken: mine !== undefined, mine: mine && fields(mine), theirs, ranged }
}

/** Both parses agree, and a text range names exactly the text. */
const agree = (r: Awaited<ReturnType<typeof both>>, label?: string) => {
  expect(r.mine, label).toEqual(r.theirs)
  if (r.ranged !== undefined) expect(r.ranged, label).toBe((r.theirs as { text?: string }).text)
}

const corpusDir = path.join(import.meta.dirname, "../../fixtures/mail/mail-gem")
const corpus = fs.readdirSync(corpusDir, { recursive: true, encoding: "utf8" })
  .filter((f) => f !== "LICENSE" && fs.statSync(path.join(corpusDir, f)).isFile())
  .sort()

/** Where a generated message's raw bytes go (a marker no generated text holds). */
const RAW_MARK = "\u0001RAW\u0001"
const withRawBytes = (message: Buffer, bytes: Uint8Array | undefined): Buffer => {
  const at = message.indexOf(RAW_MARK)
  return at < 0 ? message : Buffer.concat([message.subarray(0, at), bytes ?? new Uint8Array(), message.subarray(at + Buffer.byteLength(RAW_MARK))])
}

const crlf = (lines: ReadonlyArray<string>) => Buffer.from(lines.join("\r\n"), "utf8")

describe("the quick MIME parse", () => {
  it("gives mailparser's result for every corpus message it takes", async () => {
    const taken: Array<string> = []
    for (const file of corpus) {
      const r = await both(fs.readFileSync(path.join(corpusDir, file)))
      if (!r.taken) continue
      taken.push(file)
      agree(r, file)
    }
    // Plain and alternative mail of the corpus: the test must keep exercising the quick path.
    expect(taken.length).toBeGreaterThanOrEqual(15)
  })

  it("takes single-part text and multipart/alternative text mail, with mailparser's result", async () => {
    const messages = [
      // What postfix's smtp-source sends (the benchmark's load), as captured from `smtp-source -l 2048`:
      // no Content-Type, no Subject, a body of numbered 78-character lines.
      crlf([
        "From: <a@b.example>",
        "To: <x@y.example>",
        "Date: Fri, 27 Nov 2026 12:16:29 +0000 (UTC)",
        "Message-Id: <24d5.0003.0000@vm>",
        "",
        ...Array.from({ length: 26 }, (_, i) => `${(i + 1) % 10}${"X".repeat(77)}`),
        "",
      ]),
      crlf([
        'From: "Juma, K." <juma@example.co.tz>',
        "Subject: =?UTF-8?Q?Habari_za_asubuhi_=E2=98=95?=",
        "Message-ID: <m1@example.co.tz>",
        "MIME-Version: 1.0",
        'Content-Type: multipart/alternative; boundary="b1"',
        "",
        "This is a multi-part message in MIME format.",
        "--b1",
        "Content-Type: text/plain; charset=utf-8",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        "Karibu =E2=80=94 a soft=",
        "break.",
        "--b1",
        "Content-Type: text/html; charset=UTF-8",
        "Content-Transfer-Encoding: base64",
        "",
        Buffer.from("<p>Karibu \u2014 a soft break.</p>\r\n").toString("base64"),
        "--b1--",
        "epilogue",
        "",
      ]),
      Buffer.from("Subject: lf only\nMessage-ID: no-brackets@x\n\nline one\nline two\n"),
      // Header values the quick parse reads without libmime's decodeWords, and ones it must not:
      // an empty Subject and Message-ID before real ones (the first non-empty counts), and
      // decodeWords' own joining marker, which it removes even where no encoded word is.
      crlf(["Subject:", "Subject: second", "Message-ID:", "Message-ID: <m2@x>", "From: a@b.example", "", "body"]),
      crlf(["Subject: a__\u0000JOIN\u0000__b", "Message-ID: <__\u0000JOIN\u0000__@x>", "", "body"]),
      // A part whose body is one bare line ending: mailsplit keeps it whole when another part
      // follows, and trims it before the closing delimiter.
      crlf(["Content-Type: multipart/alternative; boundary=b", "", "--b", "Content-Type: text/plain", "", "", "--b", "Content-Type: text/plain", "", "", "--b--", ""]),
    ]
    for (const raw of messages) {
      const r = await both(raw)
      expect(r.taken).toBe(true)
      agree(r)
    }
    const parsed = await parseMail(messages[1]!)
    expect(parsed).toMatchObject({
      from: '"Juma, K." <juma@example.co.tz>',
      subject: "Habari za asubuhi \u2615",
      text: "Karibu \u2014 a softbreak.",
      html: "<p>Karibu \u2014 a soft break.</p>\n",
      messageId: "<m1@example.co.tz>",
      attachments: [],
    })
    // An alternative's one text/plain part, its bytes as they are: named by its range (a
    // quoted-printable one, above, is not).
    expect(quick(messages[1]!)!.textRange).toBeUndefined()
    const alternative = crlf([
      'Content-Type: multipart/alternative; boundary="b2"',
      "",
      "--b2",
      "Content-Type: text/plain; charset=utf-8",
      "Content-Transfer-Encoding: 8bit",
      "",
      "Habari \u{1f600}",
      "line two",
      "--b2",
      "Content-Type: text/html",
      "",
      "<p>x</p>",
      "--b2--",
      "",
    ])
    const range = quick(alternative)!.textRange!
    expect(alternative.subarray(range[0], range[1]).toString()).toBe("Habari \u{1f600}\r\nline two")
    agree(await both(alternative))
  })

  it("leaves other mail to mailparser", () => {
    const single = (contentHeaders: ReadonlyArray<string>, body = "hello") => crlf(["Subject: x", ...contentHeaders, "", body, ""])
    const declined = [
      single(["Content-Type: text/plain; charset=iso-8859-1"]),
      single(["Content-Type: text/plain; format=flowed"]),
      single(["Content-Type: text/html"]),
      single(["Content-Type: application/pdf"]),
      single(["Content-Disposition: attachment; filename=a.txt"]),
      single(["Content-Transfer-Encoding: base64"], "aGVsbG8=aGVsbG8="),
      crlf(["Subject: no blank line"]),
      crlf(["Content-Type: multipart/mixed; boundary=b", "", "--b", "Content-Type: text/plain", "", "x", "--b", "Content-Type: image/png", "Content-Disposition: attachment", "", "x", "--b--", ""]),
      crlf(["Content-Type: multipart/alternative; boundary=b", "", "--b", "Content-Type: text/plain", "", "no closing boundary", ""]),
      crlf(["Content-Type: multipart/alternative; boundary=b", "", "--b", "Content-Type: text/plain", "--b--", ""]),
      crlf(["Content-Type: multipart/alternative; boundary=b", "", "--b", "Content-Type: multipart/related; boundary=c", "", "--c--", "--b--", ""]),
    ]
    for (const raw of declined) expect(quick(raw), raw.toString()).toBeUndefined()
  })

  it("leaves a message to mailparser when the quick parse throws", async () => {
    const raw = crlf(["Subject: thrown", "", "body", ""])
    const throwing = new Proxy(raw, { get: (target, key) => (key === "indexOf" ? () => { throw new Error("unforeseen") } : Reflect.get(target, key)) })
    expect(quickParse(throwing)).toBeUndefined()
    expect(quickParse(raw)).toBeDefined()
    expect((await parseMail(raw)).subject).toBe("thrown")
  })

  it("reads the root headers of mail mailparser gives up on, from a buffer or a stream; an unreadable stream rejects", async () => {
    const parts = Array.from({ length: 1_001 }, (_, i) => `--b\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join("")
    const raw = Buffer.from(`Subject: =?utf-8?Q?caf=C3=A9?=\r\nFrom: Asha <asha@sender.example>\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n${parts}--b--\r\n`)
    await expect(simpleParser(raw, PARSER_OPTIONS)).rejects.toThrow(/child nodes/)
    const trace = [{ key: "received", line: "Received: from x by y" }]
    for (const source of [raw, () => Readable.from([raw.subarray(0, 100), raw.subarray(100)])]) {
      const m = await parseMail(source, trace)
      expect(m).toEqual({
        from: "Asha <asha@sender.example>",
        subject: "caf\u00e9",
        text: "",
        html: "",
        messageId: null,
        headers: { received: "from x by y", subject: "=?utf-8?Q?caf=C3=A9?=", from: "Asha <asha@sender.example>", "content-type": "multipart/mixed; boundary=b" },
        attachments: [],
      })
    }
    const gone = () => fs.createReadStream(path.join(os.tmpdir(), `no-such-spool-${process.pid}`))
    await expect(parseMail(gone)).rejects.toThrow(/ENOENT/)
  })

  it("gives mailparser's result for generated mail it takes", async () => {
    const eol = fc.constantFrom("\r\n", "\n")
    const token = fc.stringMatching(/^[A-Za-z0-9'()+_,./:=?-]{1,20}$/)
    const utf8Text = fc.string({ unit: fc.oneof(fc.constantFrom("a", " ", "=", "-", ".", "\t", "\r", "\n", "\u00e9", "\u2014", "\u{1f600}", "?", "_"), fc.integer({ min: 0, max: 0x10ffff }).map((c) => String.fromCodePoint(c))), maxLength: 200 })
    const encodedWord = utf8Text.chain((t) =>
      fc.constantFrom(
        `=?utf-8?B?${Buffer.from(t).toString("base64")}?=`,
        `=?UTF-8?Q?${Buffer.from(t).toString("hex").replace(/(..)/g, "=$1")}?=`,
        `=?iso-8859-1?Q?caf=E9?=`,
      )
    )
    const headerText = fc.oneof(utf8Text.map((t) => t.replace(/[\r\n]/g, " ")), encodedWord, fc.tuple(encodedWord, encodedWord).map(([a, b]) => `${a} ${b}`))
    const fold = (v: string, e: string) => v.replace(/ /, `${e} `)
    const from = fc.oneof(
      fc.constant("a@b.example"),
      headerText.map((n) => `${n} <a@b.example>`),
      headerText.map((n) => `"${n.replace(/["\\]/g, "")}" <x@xn--bcher-kva.example>`),
      fc.constant("Team: a@b.example, c@d.example;"),
      fc.constant(""),
    )
    const messageId = fc.constantFrom("<a@b>", "a@b", "", " <x@y> ", "=?utf-8?Q?id?=")
    const charset = fc.constantFrom("", "; charset=utf-8", '; charset="US-ASCII"', "; charset=UTF8", "; charset=ascii", "; charset=iso-8859-1", "; format=flowed", "; charset=utf-8 (comment)")
    const encoding = fc.constantFrom(undefined, "7bit", "8bit", "binary", "quoted-printable", "Quoted-Printable", "base64", "BASE64 (x)")
    const encoded = (text: string, cte: string | undefined, e: string, mangle: number) => {
      const kind = (cte ?? "").toLowerCase()
      if (kind.startsWith("base64")) {
        let b64 = Buffer.from(text).toString("base64").replace(/(.{76})/g, `$1${e}`)
        if (mangle === 1) b64 = b64.slice(0, Math.max(0, b64.length - 1))
        if (mangle === 2) b64 = `${b64}=QQ`
        if (mangle === 3) b64 = `${b64} !*\u00e9`
        return b64
      }
      if (kind === "quoted-printable") {
        const qp = text.replace(/[=\u0080-\u{10ffff}]/gu, (c) => Buffer.from(c).toString("hex").toUpperCase().replace(/(..)/g, "=$1"))
        return mangle === 1 ? `${qp}=${e}tail=Z` : mangle === 2 ? `${qp}=` : qp
      }
      return text.replace(/\r?\n/g, e)
    }
    const part = fc.record({
      type: fc.constantFrom("text/plain", "text/html", "TEXT/PLAIN", "", "image/png"),
      charset,
      cte: encoding,
      disposition: fc.constantFrom(undefined, "inline", "attachment", "Inline; filename=a.txt"),
      text: utf8Text,
      mangle: fc.nat({ max: 5 }),
    })
    type Part = typeof part extends fc.Arbitrary<infer T> ? T : never
    const partLines = (p: Part, e: string, root: boolean) => [
      ...(p.type || !root ? [`Content-Type: ${p.type}${p.charset}`] : []),
      ...(p.cte ? [`Content-Transfer-Encoding: ${p.cte}`] : []),
      ...(p.disposition ? [`Content-Disposition: ${p.disposition}`] : []),
      "",
      encoded(p.text, p.cte, e, p.mangle),
    ].join(e)
    const message = fc.record({
      e: eol,
      from,
      subject: fc.option(headerText, { nil: undefined }),
      messageId,
      extra: fc.array(fc.tuple(fc.constantFrom("X-Note", "Received", "Subject", "From", "To"), headerText), { maxLength: 3 }),
      fold: fc.boolean(),
      multipart: fc.boolean(),
      boundary: token,
      parts: fc.array(part, { minLength: 1, maxLength: 3 }),
      preamble: fc.constantFrom("", "preamble", "--not-it"),
      delimiter: fc.constantFrom("", "", "", "  ", "--", "\r"),
      close: fc.constantFrom("--", "--", "", "-- trailing"),
      epilogue: fc.constantFrom("", "epilogue", "--x--"),
      // A line in the first part's body that looks like a delimiter, or is one.
      inject: fc.constantFrom("", "", "--B", "--B--", "--B ", "\r--B", "--Bx", "-B"),
      // Bodies past mailsplit's 16 KiB yield and 64 KiB chunk sizes.
      big: fc.constantFrom(0, 0, 0, 400, 1200),
      // Raw bytes in the first part (CR, LF, NUL, broken UTF-8), when its encoding leaves them as they are.
      rawBytes: fc.option(fc.uint8Array({ maxLength: 200 }), { nil: undefined }),
    })
    let taken = 0
    let rangedSingle = 0
    let rangedParts = 0
    await fc.assert(
      fc.asyncProperty(message, async (m) => {
        const e = m.e
        const head = [
          `From: ${m.fold ? fold(m.from, e) : m.from}`,
          ...(m.subject === undefined ? [] : [`Subject: ${m.fold ? fold(m.subject, e) : m.subject}`]),
          `Message-ID: ${m.messageId}`,
          ...m.extra.map(([k, v]) => `${k}: ${v}`),
        ]
        const first = m.parts[0]!
        const line = m.inject.replace("B", m.boundary)
        const raw8bit = m.rawBytes && !/base64|quoted/i.test(first.cte ?? "")
        const body = (first.text + (raw8bit ? RAW_MARK : "") + (m.big ? `${e}${"0123456789 =-abcdef".repeat(4)}`.repeat(m.big) : "") + (line ? `${e}${line}${e}after` : ""))
        const parts = [{ ...first, text: body }, ...m.parts.slice(1)]
        let raw: string
        if (!m.multipart) raw = [...head, partLines(parts[0]!, e, true)].join(e)
        else {
          const b = m.boundary
          const delim = (i: number) => (m.delimiter === "\r" && i === 1 ? `\r--${b}` : `--${b}${m.delimiter === "\r" ? "" : m.delimiter}`)
          raw = [
            ...head,
            `Content-Type: multipart/alternative; boundary="${b}"`,
            "",
            ...(m.preamble ? [m.preamble] : []),
            ...parts.flatMap((p, i) => [delim(i), partLines(p, e, false)]),
            ...(m.close === "" ? [] : [`--${b}${m.close}`]),
            m.epilogue,
          ].join(e)
        }
        const r = await both(withRawBytes(Buffer.from(raw, "utf8"), m.rawBytes))
        if (!r.taken) return
        taken++
        if (r.ranged !== undefined) (m.multipart ? rangedParts++ : rangedSingle++)
        agree(r)
      }),
      { numRuns: RUNS, seed: SEED },
    )
    // The generator must keep reaching the quick path, not only the fallback, and text ranges
    // in both shapes.
    expect(taken).toBeGreaterThan(RUNS / 10)
    expect(rangedSingle).toBeGreaterThan(RUNS / 50)
    expect(rangedParts).toBeGreaterThan(0)
  }, 120_000)

  it("names an alternative's text part by its bytes exactly when they are the text", async () => {
    const utf8Text = fc.string({ unit: fc.oneof(fc.constantFrom("a", " ", "-", "\r", "\n", "\r\n", "\u00e9", "\u{1f600}"), fc.integer({ min: 0, max: 0x10ffff }).map((c) => String.fromCodePoint(c))), maxLength: 120 })
    const message = fc.record({
      e: fc.constantFrom("\r\n", "\n"),
      text: utf8Text,
      // Raw bytes in the text part (CR, LF, NUL, broken UTF-8).
      rawBytes: fc.option(fc.uint8Array({ maxLength: 60 }), { nil: undefined, freq: 2 }),
      charset: fc.constantFrom("", "; charset=utf-8", "; charset=us-ascii", "; charset=iso-8859-1"),
      cte: fc.constantFrom(undefined, "7bit", "8bit", "binary", "quoted-printable"),
      html: fc.option(utf8Text, { nil: undefined }),
      htmlFirst: fc.boolean(),
      // A second text/plain part: the text is then both joined, no one part's bytes.
      second: fc.option(utf8Text, { nil: undefined, freq: 2 }),
      big: fc.constantFrom(0, 0, 300),
    })
    let taken = 0
    let ranged = 0
    await fc.assert(
      fc.asyncProperty(message, async (m) => {
        const e = m.e
        const body = m.text.replace(/\r?\n/g, e) + (m.rawBytes ? RAW_MARK : "") + "x".repeat(m.big)
        const plain = (text: string) =>
          [`--b`, `Content-Type: text/plain${m.charset}`, ...(m.cte ? [`Content-Transfer-Encoding: ${m.cte}`] : []), "", text].join(e)
        const html = m.html === undefined ? [] : [[`--b`, "Content-Type: text/html; charset=utf-8", "", m.html.replace(/\r?\n/g, e)].join(e)]
        const parts = [plain(body), ...(m.second === undefined ? [] : [plain(m.second.replace(/\r?\n/g, e))])]
        const raw = ["Subject: alt", 'Content-Type: multipart/alternative; boundary="b"', "", ...(m.htmlFirst ? [...html, ...parts] : [...parts, ...html]), "--b--", ""].join(e)
        const r = await both(withRawBytes(Buffer.from(raw, "utf8"), m.rawBytes))
        if (!r.taken) return
        taken++
        if (r.ranged !== undefined) ranged++
        agree(r)
      }),
      { numRuns: RUNS, seed: SEED },
    )
    expect(taken).toBeGreaterThan(RUNS / 4)
    expect(ranged).toBeGreaterThan(RUNS / 10)
  }, 120_000)

  it("reads a From field as mailparser does: a plain address without addressparser, anything else through it", async () => {
    const local = fc.stringMatching(/^[\w.+-]{1,8}$/)
    const domain = fc.oneof(fc.stringMatching(/^[\w.-]{1,12}$/), fc.constantFrom("xn--bcher-kva.example", "XN--BCHER-KVA.example", "a.xn--p1ai"))
    const plain = fc.tuple(local, domain, fc.constantFrom("", "<>", "<", ">", " ", "  <> ")).map(([l, d, wrap]) =>
      wrap === "<>" ? `<${l}@${d}>` : wrap === "  <> " ? `  <${l}@${d}> ` : wrap === "<" ? `<${l}@${d}` : wrap === ">" ? `${l}@${d}>` : `${l}@${d}${wrap}`
    )
    // Characters addressparser gives a meaning to, in any order.
    const piece = fc.constantFrom("a", "Z", "0", ".", "_", "+", "-", "@", "<", ">", " ", '"', "(", ")", ",", ":", ";", "=?", "?=", "=?utf-8?Q?x?=", "xn--", "\u00e9", "\\", "[", "]", "!", "#", "\t")
    const other = fc.array(piece, { maxLength: 14 }).map((p) => p.join(""))
    let plainTaken = 0
    await fc.assert(
      fc.asyncProperty(fc.oneof(plain, other), async (value) => {
        const r = await both(crlf([`From: ${value}`, "Subject: s", "", "body"]))
        expect(r.taken).toBe(true)
        expect(r.mine!.from).toEqual((r.theirs as { from?: unknown }).from)
        if (/^\s*<?[\w.+-]+@[\w.-]+>?\s*$/.test(value)) plainTaken++
      }),
      { numRuns: RUNS, seed: SEED },
    )
    expect(plainTaken).toBeGreaterThan(RUNS / 10)
  }, 120_000)
})
