/**
 * SMTP fuzz (DECISIONS.md "Hostile input"): generated hostile mail over real sockets to the MX
 * (on the event loop and on its thread, MX_THREAD) and the sandbox. Random and broken MIME (unclosed and nested multiparts, bad transfer
 * encodings, unknown charsets, binary bodies), NUL, control and 8-bit bytes in header names and
 * values, header injection (CR/LF inside values), DKIM signatures with junk tags, odd envelopes
 * (null sender, 8-bit +tags) and junk lines pipelined around the transaction. Every message must
 * be answered 250 (mail is never refused for its content: not a 4xx, which the sender would retry
 * for days, nor a 5xx, which bounces it), every 250 must be stored exactly once and readable
 * through the API, and the servers must keep serving.
 *
 * Bounded and seeded in `npm test`; a longer run:
 *   SMTP_FUZZ_RUNS=2000 SMTP_FUZZ_SEED=$RANDOM npx vitest run test/fuzz/smtp.test.ts
 * A failure prints the seed and the shrunk case, so it can be replayed with that seed.
 */
import fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SmtpMemory } from "../../src/smtp/limits.ts"
import { startMxOnThread } from "../../src/smtp/mx-threaded.ts"
import { createAccount } from "../support/accounts.ts"
import { connectSmtp, dataBlock, type RawSmtp, type SmtpReply } from "../support/smtp-client.ts"
import { createAddress, fund, type InboundTestApp, query, startInboundApp } from "../support/inbound.ts"
import { plain } from "../sandbox/support.ts"

const RUNS = Number(process.env.SMTP_FUZZ_RUNS ?? 80)
const SEED = Number(process.env.SMTP_FUZZ_SEED ?? 20261123)

// Everything is built as latin1 strings: one character per byte, so any byte can appear.
const byte = fc.integer({ min: 0, max: 255 }).map((b) => String.fromCharCode(b))
const bytes = (maxLength: number) => fc.string({ unit: byte, maxLength })
/** Bytes without CR or LF (a header value or a command line stays one line, unless injected on purpose). */
const lineBytes = (maxLength: number) => fc.string({ unit: byte.filter((c) => c !== "\r" && c !== "\n"), maxLength })
const word = fc.stringMatching(/^[A-Za-z0-9-]{1,12}$/)

const headerName = fc.oneof(
  fc.constantFrom("Subject", "From", "To", "Cc", "Reply-To", "Message-ID", "Date", "Content-Type", "Content-Transfer-Encoding", "Received", "X-Mailer", "List-Id", "Auto-Submitted"),
  word,
  lineBytes(20).map((s) => s.replace(/:/g, "") || "X"),
)
const headerValue = fc.oneof(
  lineBytes(120),
  // Header injection: a value smuggling more headers or an early body.
  fc.tuple(lineBytes(30), fc.constantFrom("\r\nBcc: victim@example.com", "\r\n\r\nbody early", "\nX-Injected: 1", "\r X: y"), lineBytes(30))
    .map((parts) => parts.join("")),
  fc.tuple(fc.constantFrom("=?utf-8?B?", "=?bogus?Q?", "=?iso-2022-jp?B?", "=?utf-8?Q?"), lineBytes(40), fc.constantFrom("?=", "", "?"))
    .map((parts) => parts.join("")),
  fc.constantFrom("\u0000", "a\u0000b", "\u00ff\u00fe", "caf\u00e9", "\u00c3\u0028", "\u00ed\u00a0\u0080"),
  fc.integer({ min: 500, max: 3000 }).map((n) => "x".repeat(n)),
)
const dkimSignature = fc.tuple(lineBytes(20), fc.constantFrom("exa\u0000mple.com", "example.com", "\u00ff.com", ""), lineBytes(40))
  .map(([a, d, b]) => `DKIM-Signature: v=1; a=rsa-sha256; d=${d}; s=${a}; h=from; bh=${b}; b=AAAA`)
const header = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(headerName, headerValue).map(([n, v]) => `${n}: ${v}`) },
  { weight: 1, arbitrary: dkimSignature },
  { weight: 1, arbitrary: lineBytes(60) }, // not a header at all
)

const charset = fc.constantFrom("utf-8", "iso-8859-1", "shift_jis", "x-unknown", "utf-7", "", "\u0000")
const encoding = fc.constantFrom("7bit", "8bit", "base64", "quoted-printable", "binary", "x-uuencode", "bogus")
const leaf = fc.tuple(fc.constantFrom("text/plain", "text/html", "application/pdf", "image/png", "message/rfc822", "x/y"), charset, encoding, bytes(400))
  .map(([type, cs, enc, body]) => `Content-Type: ${type}; charset="${cs}"; name="f\u00e9.bin"\r\nContent-Transfer-Encoding: ${enc}\r\n\r\n${body}`)
const part: fc.Arbitrary<string> = fc.letrec<{ part: string }>((tie) => ({
  part: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.tuple(word, fc.array(tie("part"), { maxLength: 3 }), fc.boolean(), fc.boolean()).map(([boundary, parts, closed, preamble]) =>
      `Content-Type: multipart/mixed; boundary="${boundary}"\r\n\r\n${preamble ? "preamble\r\n" : ""}` +
      parts.map((p) => `--${boundary}\r\n${p}\r\n`).join("") + (closed ? `--${boundary}--\r\n` : `--${boundary.slice(0, -1)}`)
    ),
  ),
})).part

const message = fc.tuple(fc.array(header, { maxLength: 8 }), fc.oneof(part, bytes(800)), fc.boolean())
  .map(([headers, body, blank]) => [...headers, ...(blank ? [""] : []), body].join("\r\n"))

/** Lines that are no command at all, pipelined around the transaction. */
const junk = fc.array(lineBytes(40).map((s) => `X${s}`), { maxLength: 3 })
const sender = fc.oneof(fc.constant(""), fc.constant("a@sender.example"), lineBytes(10).map((s) => `${s.replace(/[<>\s\u0000-\u001f\u007f@]/g, "") || "x"}@sender.example`))
const tag = fc.oneof(fc.constant(""), lineBytes(8).map((s) => `+${s.replace(/[<>\s\u0000-\u001f\u007f@]/g, "")}`))

const transcript = fc.record({ message, junkBefore: junk, junkAfter: junk, sender, tag, pipelined: fc.boolean() })
type Transcript = typeof transcript extends fc.Arbitrary<infer T> ? T : never

let app: InboundTestApp
let apiKey: string
let mailbox: { local: string; domain: string; userId: number }
let login: { username: string; password: string; userId: number }
beforeAll(async () => {
  app = await startInboundApp()
  const account = await createAccount(app.api)
  await fund(app.api, account.userId, 5 * (RUNS + 10))
  const address = await createAddress(app.api, account.apiKey, "fuzz")
  apiKey = account.apiKey
  const [local, domain] = address.email.split("@") as [string, string]
  mailbox = { local, domain, userId: account.userId }
  const sandboxAccount = await createAccount(app.api)
  const settings = (await app.api.call("GET", "/api/sandbox/credentials/smtp", { token: sandboxAccount.apiKey })).body.data
  login = { username: settings.username, password: settings.password, userId: sandboxAccount.userId }
})
afterAll(() => app.stop())

const latin1 = (s: string) => Buffer.from(s, "latin1")

/** A session that survives across runs; opened again when the server closed it. */
const sessions = (open: () => Promise<RawSmtp>) => {
  let current: RawSmtp | undefined
  let closed = true
  return {
    get: async () => {
      if (!current || closed) {
        current = await open()
        closed = false
        void current.closed.then(() => (closed = true))
      }
      return current
    },
    close: () => current?.destroy(),
  }
}

/**
 * Runs one transcript; returns the reply to the message (undefined when no message was sent:
 * the envelope was refused, or the server dropped the session over junk lines, which it may).
 */
const play = async (smtp: RawSmtp, t: Transcript, to: string): Promise<SmtpReply | undefined> => {
  try {
    return await playing(smtp, t, to)
  } catch (e) {
    if (e instanceof Answered) throw e.cause
    // The connection closed before DATA (too many junk commands): allowed, the next run reconnects.
    return undefined
  }
}

/** Wraps a failure after the message was sent: that one is never excused. */
class Answered extends Error {}

const playing = async (smtp: RawSmtp, t: Transcript, to: string): Promise<SmtpReply | undefined> => {
  const lines = [...t.junkBefore, `MAIL FROM:<${t.sender}>`, `RCPT TO:<${to}>`]
  const body = dataBlock(latin1(t.message))
  if (t.pipelined) {
    smtp.write(Buffer.concat([latin1([...lines, "DATA"].map((l) => `${l}\r\n`).join("")), body]))
    const replies = await smtp.replies(lines.length + 1)
    const [rcpt, data] = replies.slice(-2)
    if (rcpt!.code !== 250 || data!.code !== 354) {
      // The message went in as command lines: drop this session, the next run opens another.
      smtp.destroy()
      return undefined
    }
  } else {
    for (const l of lines) {
      smtp.write(latin1(`${l}\r\n`))
      const r = await smtp.reply()
      if (l.startsWith("RCPT") && r.code !== 250) return undefined
    }
    smtp.write("DATA\r\n")
    if ((await smtp.reply()).code !== 354) return undefined
    smtp.write(body)
  }
  const answer = await smtp.reply().catch((e: Error) => {
    throw new Answered("no answer to the message", { cause: e })
  })
  for (const l of t.junkAfter) smtp.write(latin1(`${l}\r\n`))
  if (t.junkAfter.length > 0) await smtp.replies(t.junkAfter.length).catch(() => smtp.destroy())
  return answer
}

const noLeftovers = async () => {
  expect(fs.readdirSync(path.join(app.api.settings.dataDir, "spool"))).toEqual([])
  expect(await app.api.run(SmtpMemory.useSync((m) => m.used))).toBe(0)
}

describe(`SMTP fuzz (seed ${SEED}, ${RUNS} runs per server)`, () => {
  /** The MX property on `port`, into a mailbox of its own. */
  const fuzzMx = async (port: number, box: { local: string; domain: string; userId: number; apiKey: string }) => {
    const mx = sessions(async () => {
      const s = await connectSmtp(port)
      await s.command("EHLO fuzz.example.net")
      return s
    })
    const accepted: Array<number> = []
    await fc.assert(
      fc.asyncProperty(transcript, async (t) => {
        const answer = await play(await mx.get(), t, `${box.local}${t.tag}@${box.domain}`)
        if (!answer) return
        expect(answer.code, answer.text).toBe(250)
        accepted.push(Number(/stored as (\d+)/.exec(answer.text)![1]))
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    )
    mx.close()
    expect(accepted.length).toBeGreaterThan(RUNS / 2)
    const rows = await query<{ id: number }>(app.api, "SELECT id FROM inbound_messages WHERE user_id = $1 ORDER BY id", [box.userId])
    expect(rows.map((r) => r.id)).toEqual([...accepted].sort((a, b) => a - b))
    for (const id of accepted.slice(0, 40)) {
      const one = await app.api.call("GET", `/api/inbound/messages/${id}`, { token: box.apiKey })
      expect(one.status).toBe(200)
      expect(JSON.stringify(one.body)).not.toContain("\\u0000")
    }
    const fresh = await connectSmtp(port)
    expect(fresh.greeting?.code).toBe(220)
    fresh.destroy()
    await noLeftovers()
  }

  it("the MX answers every message 250, stores each once, and keeps serving", { timeout: 300_000 }, async () => {
    await fuzzMx(app.mx, { ...mailbox, apiKey })
  })

  it("the same with the MX's protocol on a thread of its own (MX_THREAD)", { timeout: 300_000 }, async () => {
    const account = await createAccount(app.api)
    await fund(app.api, account.userId, 5 * (RUNS + 10))
    const address = await createAddress(app.api, account.apiKey, "fuzz-thread")
    const [local, domain] = address.email.split("@") as [string, string]
    const threaded = await startMxOnThread(app.api.runtime, { ...app.api.settings, smtpPort: 0 })
    try {
      await fuzzMx(threaded.port, { local, domain, userId: account.userId, apiKey: account.apiKey })
    } finally {
      await threaded.close()
    }
  })

  it("the sandbox answers every message 250, captures each once, and keeps serving", { timeout: 300_000 }, async () => {
    const sandbox = sessions(async () => {
      const s = await connectSmtp(app.api.ports.sandbox!)
      await s.command("EHLO fuzz.example.net")
      expect((await s.command(`AUTH PLAIN ${plain(login.username, login.password)}`)).code).toBe(235)
      return s
    })
    let captured = 0
    await fc.assert(
      fc.asyncProperty(transcript, async (t) => {
        const answer = await play(await sandbox.get(), t, `someone${t.tag}@example.com`)
        if (!answer) return
        expect(answer.code, answer.text).toBe(250)
        captured++
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    )
    sandbox.close()
    expect(captured).toBeGreaterThan(RUNS / 2)
    const [row] = await query<{ n: number }>(app.api, "SELECT count(*)::int8 AS n FROM sandbox_messages WHERE user_id = $1", [login.userId])
    expect(row!.n).toBe(captured)
    const fresh = await connectSmtp(app.api.ports.sandbox!)
    expect(fresh.greeting?.code).toBe(220)
    fresh.destroy()
    await noLeftovers()
  })
})
