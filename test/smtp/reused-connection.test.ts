/**
 * What the MX reads to tell a reused connection (src/smtp/mx.ts `reusedConnection`, which decides
 * where a message is prepared, src/ingest/prepare-pool.ts `placed`): smtp-server's
 * `session.transaction` is 1 for a connection's first transaction and counts up once a DATA
 * ended, answered 250 or refused alike; a transaction that never reached the end of DATA (RSET,
 * a refused RCPT) does not count.
 */
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import { afterAll, beforeAll, expect, it } from "vitest"
import { connectSmtp, dataBlock, type RawSmtp } from "../support/smtp-client.ts"

const seen: Array<{ subject: string; reused: boolean }> = []
let server: SMTPServer
let port = 0

beforeAll(async () => {
  server = new SMTPServer({
    disabledCommands: ["AUTH", "STARTTLS"],
    logger: false,
    onRcptTo(address, _session, callback) {
      callback(address.address.startsWith("nobody@") ? Object.assign(new Error("no such mailbox"), { responseCode: 550 }) : null)
    },
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        const subject = /^Subject: (.*)$/m.exec(Buffer.concat(chunks).toString("latin1"))?.[1]?.trim() ?? ""
        seen.push({ subject, reused: session.transaction > 1 })
        // The first message is refused: a refused DATA still counts as a transaction that ended.
        callback(subject === "one" ? Object.assign(new Error("try again later"), { responseCode: 452 }) : null)
      })
    },
  })
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()))
  port = (server.server.address() as AddressInfo).port
})
afterAll(() => new Promise<void>((done) => server.close(() => done())))

const send = async (smtp: RawSmtp, subject: string, to = "asha@inbox.localhost") => {
  expect((await smtp.command("MAIL FROM:<bench@sender.example>")).code).toBe(250)
  expect((await smtp.command(`RCPT TO:<${to}>`)).code).toBe(250)
  expect((await smtp.command("DATA")).code).toBe(354)
  smtp.write(dataBlock(`Subject: ${subject}\r\n\r\nHabari\r\n`))
  return (await smtp.reply()).code
}

it("counts a connection's transactions that reached the end of DATA, refused or not", async () => {
  const first = await connectSmtp(port, { waitGreeting: true })
  expect((await first.command("EHLO client.sender.example")).code).toBe(250)
  // Neither a RSET nor a transaction whose only recipient was refused counts.
  expect((await first.command("MAIL FROM:<bench@sender.example>")).code).toBe(250)
  expect((await first.command("RSET")).code).toBe(250)
  expect((await first.command("MAIL FROM:<bench@sender.example>")).code).toBe(250)
  expect((await first.command("RCPT TO:<nobody@inbox.localhost>")).code).toBe(550)
  expect((await first.command("RSET")).code).toBe(250)
  expect(await send(first, "one")).toBe(452)
  expect(await send(first, "two")).toBe(250)
  expect(await send(first, "three")).toBe(250)
  first.destroy()

  const second = await connectSmtp(port, { waitGreeting: true })
  expect((await second.command("EHLO client.sender.example")).code).toBe(250)
  expect(await send(second, "four")).toBe(250)
  second.destroy()

  expect(seen).toEqual([
    { subject: "one", reused: false },
    { subject: "two", reused: true },
    { subject: "three", reused: true },
    { subject: "four", reused: false },
  ])
})
