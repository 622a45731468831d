/**
 * Helpers shared by the inbound, SMTP and compliance tests: an app wired to a loopback DNS
 * server (so mail authentication and domain checks never leave the machine), wallet funding,
 * address creation and direct database peeks.
 */
import { expect } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { Database } from "../../effects/ports/Database.ts"
import type { Settings } from "../../effects/config.ts"
import { makeTestApp, type TestApp } from "./app.ts"
import { startDnsServer, type TestDnsServer, zoneFixture } from "./dns-server.ts"

export interface InboundTestApp {
  readonly api: TestApp
  readonly dns: TestDnsServer
  /** The MX listener's port. */
  readonly mx: number
  readonly stop: () => Promise<void>
}

export const startInboundApp = async (
  options: { readonly settings?: Partial<Settings>; readonly workers?: boolean } = {},
): Promise<InboundTestApp> => {
  const dns = await startDnsServer(zoneFixture("platform.json"))
  const api = await makeTestApp({ workers: options.workers ?? false, settings: { dnsServers: [dns.address], ...options.settings } })
  return {
    api,
    dns,
    mx: api.ports.mx!,
    stop: async () => {
      await api.stop()
      await dns.close()
    },
  }
}

export const fund = (api: TestApp, userId: number, amount: number) =>
  api.run(Billing.use((b) => b.credit({ userId, amount, kind: "credit", reference: { type: "test" } })))

export const balance = (api: TestApp, userId: number) => api.run(Billing.use((b) => b.balance(userId)))

/** Creates an address over HTTP and returns the InboundAddress. */
export const createAddress = async (api: TestApp, apiKey: string, local_part: string, extra: Record<string, unknown> = {}) => {
  const r = await api.call("POST", "/api/inbound/addresses", { token: apiKey, body: { local_part, ...extra } })
  expect(r.status, JSON.stringify(r.body)).toBe(201)
  return r.body.data as { id: number; email: string; local_part: string; domain_id: number | null; retention_days: number }
}

/** A name no other test uses (local parts, labels): `prefix-` and six hex digits. */
export const unique = (prefix: string) => `${prefix}-${Math.random().toString(16).slice(2, 8)}`

export const query = <T = Record<string, unknown>>(api: TestApp, sql: string, params: ReadonlyArray<unknown> = []) =>
  api.run(Database.use((db) => db.query<T>(sql, params)))

export const countMessages = async (api: TestApp, userId: number): Promise<number> => {
  const [row] = await query<{ n: number }>(api, "SELECT count(*)::int8 AS n FROM inbound_messages WHERE user_id = $1", [userId])
  return row!.n
}

/** A plain message with the given headers and body, CRLF line ends. */
export const plainMessage = (o: { from?: string; to?: string; subject?: string; body?: string; extra?: string } = {}) =>
  [
    `From: ${o.from ?? "Alice <alice@sender.example>"}`,
    `To: ${o.to ?? "info@inbox.localhost"}`,
    `Subject: ${o.subject ?? "Hello"}`,
    "Message-ID: <test-" + Math.random().toString(16).slice(2) + "@sender.example>",
    "Date: Sun, 22 Nov 2026 08:00:00 +0300",
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    ...(o.extra ? [o.extra] : []),
    "",
    o.body ?? "Habari! This is a test.",
    "",
  ].join("\r\n")

/** A PDF's bytes, base64, as `messageWithPdf` attaches them. */
export const PDF_BASE64 = Buffer.from("%PDF-1.4 batch attachment \u0000\u00ff").toString("base64")

/**
 * A multipart/alternative message: a text/plain part (`text`, its transfer encoding `textHeaders`)
 * and a text/html part (`html`), after the root header lines `head`; CRLF line ends.
 */
export const alternativeMessage = (o: { text: string; html: string; head?: ReadonlyArray<string>; textHeaders?: ReadonlyArray<string> }) =>
  [
    ...(o.head ?? ["From: <asha@sender.example>", "Subject: alt"]),
    'Content-Type: multipart/alternative; boundary="sehemu"',
    "",
    "--sehemu",
    "Content-Type: text/plain; charset=utf-8",
    ...(o.textHeaders ?? []),
    "",
    o.text,
    "--sehemu",
    "Content-Type: text/html; charset=utf-8",
    "",
    o.html,
    "--sehemu--",
    "",
  ].join("\r\n")

/** A multipart message: a text part (`text`) and a PDF attachment (PDF_BASE64), CRLF line ends. */
export const messageWithPdf = (text = "Habari") =>
  [
    "From: Asha <asha@sender.example>",
    "Subject: Ankara",
    "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b"',
    "",
    "--b",
    "Content-Type: text/plain; charset=utf-8",
    "",
    text,
    "--b",
    'Content-Type: application/pdf; name="a.pdf"',
    "Content-Transfer-Encoding: base64",
    "",
    PDF_BASE64,
    "--b--",
    "",
  ].join("\r\n")
