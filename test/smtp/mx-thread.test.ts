/**
 * The MX with its protocol on a thread of its own (MX_THREAD; src/smtp/mx-threaded.ts), on both
 * engines: mail over a real socket, answered only after the commit; STARTTLS on the thread with
 * the session's TLS facts stored; the per-IP cap and the memory budget (shared with the sandbox
 * on the event loop); a thread that dies gives back its sessions' holds and memory and is
 * replaced on the same port; stopping closes the port.
 */
import { Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Reservations } from "../../effects/ingest/admission.ts"
import { RESTART_MS, startMxOnThread, type ThreadedMx } from "../../src/smtp/mx-threaded.ts"
import { SmtpMemory } from "../../src/smtp/limits.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp } from "../support/app.ts"
import { connectSmtp, dataBlock, type RawSmtp } from "../support/smtp-client.ts"
import { features, makeCertificate, plainEhlo, startTls } from "../transport/tls-client.ts"
import { balance, countMessages, createAddress, fund, type InboundTestApp, plainMessage, startInboundApp, unique } from "../support/inbound.ts"

let app: InboundTestApp
beforeAll(async () => {
  app = await startInboundApp({ settings: { mxThread: true, smtpMaxSessionsPerIp: 4, smtpMemoryBytes: 2 * 1024 * 1024 } })
})
afterAll(() => app?.stop())

const fundedAddress = async (amount = 1000) => {
  const account = await createAccount(app.api)
  if (amount > 0) await fund(app.api, account.userId, amount)
  const address = await createAddress(app.api, account.apiKey, unique("thr"))
  return { ...account, address }
}

const until = async (ok: () => boolean | Promise<boolean>, what: string, ms = 10_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const memoryUsed = () => app.api.run(SmtpMemory.useSync((m) => m.used))
const heldFor = (userId: number) => app.api.run(Reservations.useSync((r) => r.heldFor(userId)))

/** EHLO, MAIL and RCPT on a fresh session of `port`; returns the session and the RCPT's code. */
const admitted = async (port: number, to: string) => {
  const smtp = await connectSmtp(port)
  await smtp.command("EHLO thread.example.net")
  expect((await smtp.command("MAIL FROM:<a@sender.example>")).code).toBe(250)
  return { smtp, rcpt: (await smtp.command(`RCPT TO:<${to}>`)).code }
}

describe("the MX on its own thread", () => {
  it("takes pipelined mail on one connection: 550 for no such mailbox, 250 naming the stored ids, each charged once", async () => {
    const { userId, address } = await fundedAddress()
    const smtp = await connectSmtp(app.mx)
    await smtp.command("EHLO thread.example.net")
    for (const subject of ["one", "two"]) {
      smtp.write(`MAIL FROM:<a@sender.example>\r\nRCPT TO:<${address.email}>\r\nRCPT TO:<nobody-${address.local_part}@inbox.localhost>\r\nDATA\r\n`)
      const [mail, rcpt, unknown, data] = await smtp.replies(4)
      expect([mail!.code, rcpt!.code, unknown!.code, data!.code]).toEqual([250, 250, 550, 354])
      expect(unknown!.text).toMatch(/^5\.1\.1 /)
      smtp.write(dataBlock(plainMessage({ to: address.email, subject })))
      const stored = await smtp.reply()
      expect(stored.code).toBe(250)
      expect(stored.text).toMatch(/^2\.0\.0 OK: stored as \d+$/)
    }
    expect((await smtp.command("QUIT")).code).toBe(221)
    expect(await countMessages(app.api, userId)).toBe(2)
    expect(await balance(app.api, userId)).toBe(990)
    expect(await heldFor(userId)).toBe(0)
  })

  it("an account that can pay for one copy: the second RCPT gets 452 4.2.2 while the first holds the money", async () => {
    const { userId, address } = await fundedAddress(5)
    const first = await admitted(app.mx, address.email)
    expect(first.rcpt).toBe(250)
    const second = await admitted(app.mx, address.email)
    expect(second.rcpt).toBe(452)
    // The first session's RSET + new MAIL lets its hold go: the second may now have it.
    expect((await first.smtp.command("RSET")).code).toBe(250)
    expect((await first.smtp.command("MAIL FROM:<b@sender.example>")).code).toBe(250)
    expect(await heldFor(userId)).toBe(0)
    expect((await second.smtp.command(`RCPT TO:<${address.email}>`)).code).toBe(250)
    for (const s of [first.smtp, second.smtp]) s.destroy()
    await until(async () => (await heldFor(userId)) === 0, "the closed session's hold to go")
  })

  it("upgrades with STARTTLS on the thread and stores the session's TLS facts (ESMTPS)", async () => {
    const { apiKey, address } = await fundedAddress()
    const overTls = nodemailer.createTransport({
      host: "127.0.0.1",
      port: app.mx,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false, servername: "mx.inbox.localhost" },
    })
    const info = await overTls.sendMail({ from: "a@sender.example", to: address.email, subject: "over TLS", text: "t" })
    expect(info.response).toMatch(/^250 /)
    const list = await app.api.call("GET", `/api/inbound/messages?address_id=${address.id}`, { token: apiKey })
    const [message] = list.body.data
    expect(message.tls.protocol).toMatch(/^TLSv1\.[23]$/)
    expect(message.tls.cipher).toMatch(/^TLS_|AES|CHACHA/)
    expect(JSON.stringify(message.headers.received)).toMatch(/with ESMTPS id/)
  })

  it("counts sessions per client IP on the thread: the one over SMTP_MAX_SESSIONS_PER_IP gets 421 4.7.0", async () => {
    const open: Array<RawSmtp> = []
    for (let i = 0; i < 4; i++) open.push(await connectSmtp(app.mx))
    const extra = await connectSmtp(app.mx, { waitGreeting: false })
    const refused = await extra.reply()
    expect([refused.code, refused.text.slice(0, 5)]).toEqual([421, "4.7.0"])
    open.shift()!.destroy()
    await until(async () => {
      const again = await connectSmtp(app.mx, { waitGreeting: false })
      const greeting = await again.reply()
      again.destroy()
      return greeting.code === 220
    }, "a freed session slot")
    for (const s of open) s.destroy()
  })

  it("reads DATA within the process's one memory budget (the sandbox's too), spooling past 1 MiB, and gives every byte back", async () => {
    const { userId, address } = await fundedAddress()
    const { smtp } = await admitted(app.mx, address.email)
    expect((await smtp.command("DATA")).code).toBe(354)
    // 200 KiB in flight on the thread: counted in the budget the event loop sees.
    smtp.write(Buffer.from(`Subject: big\r\n\r\n${"A".repeat(1022)}\r\n`.repeat(200)))
    await until(async () => (await memoryUsed()) >= 200 * 1024, "the thread's bytes to be counted")
    // Past 1 MiB it spools to DATA_DIR: the budget holds at most the reserve meanwhile.
    smtp.write(Buffer.from(`${"B".repeat(1022)}\r\n`.repeat(1200)))
    await until(() => fs.readdirSync(path.join(app.api.settings.dataDir, "spool")).length === 1, "a spool file")
    smtp.write(".\r\n")
    expect((await smtp.reply()).code).toBe(250)
    smtp.destroy()
    expect(await countMessages(app.api, userId)).toBe(1)
    await until(async () => (await memoryUsed()) === 0, "the budget to be given back")
    await until(() => fs.readdirSync(path.join(app.api.settings.dataDir, "spool")).length === 0, "the spool file to go")
  })
})

describe("the thread's life", () => {
  let mx: ThreadedMx
  beforeAll(async () => {
    // A second MX on the same runtime, to hold its thread by the hand.
    mx = await startMxOnThread(app.api.runtime, { ...app.api.settings, smtpPort: 0 })
  })
  afterAll(() => mx?.close())

  it("a thread that dies gives back its sessions' holds, memory and spool files, and another takes the same port", async () => {
    const { userId, address } = await fundedAddress(10)
    const spool = () => fs.readdirSync(path.join(app.api.settings.dataDir, "spool"))
    // One message in memory, one past 1 MiB spooling to DATA_DIR, both cut off by the thread's end.
    const { smtp, rcpt } = await admitted(mx.port, address.email)
    expect(rcpt).toBe(250)
    expect((await smtp.command("DATA")).code).toBe(354)
    smtp.write(Buffer.from(`Subject: cut\r\n\r\n${"C".repeat(1022)}\r\n`.repeat(100)))
    const big = await admitted(mx.port, address.email)
    expect(big.rcpt).toBe(250)
    expect((await big.smtp.command("DATA")).code).toBe(354)
    big.smtp.write(Buffer.from(`Subject: big\r\n\r\n${"D".repeat(1022)}\r\n`.repeat(1200)))
    await until(async () => (await heldFor(userId)) === 10 && (await memoryUsed()) >= 100 * 1024 && spool().length === 1, "the holds, the bytes and a spool file")
    const dying = mx.thread()!
    await dying.terminate()
    await Promise.all([smtp.closed, big.smtp.closed])
    await until(async () => (await heldFor(userId)) === 0 && (await memoryUsed()) === 0, "the dead thread's holds and bytes to be given back")
    expect(spool()).toEqual([])
    await until(() => mx.thread() !== undefined && mx.thread() !== dying, "another thread", RESTART_MS + 10_000)
    // The same port, the same money: the copy that was cut can be sent again and is charged once.
    const again = await admitted(mx.port, address.email)
    expect(again.rcpt).toBe(250)
    expect((await again.smtp.command("DATA")).code).toBe(354)
    again.smtp.write(dataBlock(plainMessage({ to: address.email, subject: "again" })))
    expect((await again.smtp.reply()).code).toBe(250)
    again.smtp.destroy()
    expect(await countMessages(app.api, userId)).toBe(1)
    expect(await balance(app.api, userId)).toBe(5)
  })

  it("stopping closes the port and ends the thread", async () => {
    const thread = mx.thread()!
    const exited = new Promise<number>((r) => thread.once("exit", r))
    await mx.close()
    await exited
    expect(mx.thread()).toBeUndefined()
    await expect(connectSmtp(mx.port)).rejects.toThrow()
  })
})

describe("the thread's certificate", () => {
  it("serves the operator's files, and on SIGHUP the re-read ones (the connections after it)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mx-thread-tls-"))
    const first = await makeCertificate("mail.example.co.tz")
    fs.writeFileSync(path.join(dir, "cert.pem"), first.cert)
    fs.writeFileSync(path.join(dir, "key.pem"), first.key)
    const tlsApp = await makeTestApp({
      workers: false,
      settings: { mxThread: true, tlsCertFile: Option.some(path.join(dir, "cert.pem")), tlsKeyFile: Option.some(path.join(dir, "key.pem")) },
    })
    const served = async () => {
      const s = await startTls(tlsApp.ports.mx!, "mail.example.co.tz")
      s.close()
      return s.certificate.fingerprint256
    }
    try {
      expect(await served()).toBe(first.fingerprint)
      const renewed = await makeCertificate("mail.example.co.tz")
      fs.writeFileSync(path.join(dir, "cert.pem"), renewed.cert)
      fs.writeFileSync(path.join(dir, "key.pem"), renewed.key)
      expect(await served()).toBe(first.fingerprint)
      process.kill(process.pid, "SIGHUP")
      await until(async () => (await served()) === renewed.fingerprint, "the renewed certificate on the thread")
    } finally {
      await tlsApp.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("in production without certificate files offers no STARTTLS", async () => {
    const prod = await makeTestApp({ workers: false, settings: { mxThread: true, production: true } })
    try {
      const ehlo = await plainEhlo(prod.ports.mx!)
      expect(ehlo.code).toBe(250)
      expect(features(ehlo)).not.toContain("STARTTLS")
      expect((await ehlo.session.command("STARTTLS")).code).toBeGreaterThanOrEqual(500)
      ehlo.session.close()
    } finally {
      await prod.stop()
    }
  })
})
