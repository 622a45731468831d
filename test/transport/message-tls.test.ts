/**
 * `tls` on stored messages (DECISIONS.md "TLS on the SMTP servers"), focused: every stored
 * inbound and captured message carries `{protocol, cipher}` or null, in lists and by id; the
 * Received line says ESMTP in plaintext and ESMTPS over TLS; the OpenAPI document shows the field.
 */
import * as fs from "node:fs"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Billing } from "../../effects/billing/service.ts"
import { generatedFiles } from "../../src/smtp/tls.ts"
import { createAccount, type TestAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress } from "../support/inbound-fixtures.ts"
import { smtpLogin } from "../sandbox/support.ts"

let api: TestApp
let tlsOptions: { ca: string; servername: string }
beforeAll(async () => {
  api = await makeTestApp({ workers: false })
  tlsOptions = { ca: fs.readFileSync(generatedFiles(api.settings.dataDir, api.settings.mxHost).cert, "utf8"), servername: api.settings.mxHost }
})
afterAll(() => api?.stop())

const TLS = { protocol: expect.stringMatching(/^TLSv1\.[23]$/), cipher: expect.stringMatching(/^[A-Z0-9_-]+$/) }

const get = async (account: TestAccount, path: string) => {
  const r = await api.call("GET", path, { token: account.apiKey })
  expect(r.status, JSON.stringify(r.body)).toBe(200)
  return r.body.data
}

describe("inbound messages", () => {
  it("plaintext: tls null in the list and by id, Received says ESMTP; STARTTLS: tls set in both", async () => {
    const owner = await createAccount(api)
    const local = `tls-${Math.random().toString(16).slice(2, 10)}`
    const addressId = await createAddress(api, owner.userId, local)
    await api.run(Billing.use((b) => b.credit({ userId: owner.userId, amount: 100, kind: "credit", reference: { type: "test" } })))
    const to = `${local}@inbox.localhost`
    const plain = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.mx!, secure: false, ignoreTLS: true })
    const overTls = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.mx!, secure: false, requireTLS: true, tls: tlsOptions })
    await plain.sendMail({ from: "a@sender.example", to, subject: "plain", text: "t" })
    await overTls.sendMail({ from: "a@sender.example", to, subject: "secured", text: "t" })

    const list = (await get(owner, `/api/inbound/messages?address_id=${addressId}`)) as Array<{ id: number; subject: string; tls: unknown }>
    const bySubject = Object.fromEntries(list.map((m) => [m.subject, m]))
    expect(bySubject.plain!.tls).toBeNull()
    expect(bySubject.secured!.tls).toEqual(TLS)

    const plainOne = await get(owner, `/api/inbound/messages/${bySubject.plain!.id}`)
    expect(plainOne.tls).toBeNull()
    expect(JSON.stringify(plainOne.headers.received)).toMatch(/with ESMTP id/)
    const securedOne = await get(owner, `/api/inbound/messages/${bySubject.secured!.id}`)
    expect(securedOne.tls).toEqual(bySubject.secured!.tls)
    expect(JSON.stringify(securedOne.headers.received)).toMatch(/with ESMTPS id/)
  })
})

describe("captured (sandbox) messages", () => {
  it("plaintext: tls null; SMTPS (implicit TLS): tls set, in the list and by id", async () => {
    const owner = await createAccount(api)
    const { username, password } = (await smtpLogin(api, owner.apiKey)) as { username: string; password: string }
    const auth = { user: username, pass: password }
    const plain = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.sandbox!, secure: false, ignoreTLS: true, auth })
    const smtps = nodemailer.createTransport({ host: "127.0.0.1", port: api.ports.sandbox_smtps!, secure: true, tls: tlsOptions, auth })
    await plain.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: "plain", text: "t" })
    await smtps.sendMail({ from: "app@example.co.tz", to: "x@example.co.tz", subject: "smtps", text: "t" })

    const list = (await get(owner, "/api/sandbox/messages")) as Array<{ id: number; subject: string; tls: unknown }>
    const bySubject = Object.fromEntries(list.map((m) => [m.subject, m]))
    expect(bySubject.plain!.tls).toBeNull()
    expect(bySubject.smtps!.tls).toEqual(TLS)
    expect((await get(owner, `/api/sandbox/messages/${bySubject.plain!.id}`)).tls).toBeNull()
    expect((await get(owner, `/api/sandbox/messages/${bySubject.smtps!.id}`)).tls).toEqual(bySubject.smtps!.tls)
  })
})

describe("OpenAPI", () => {
  it("documents tls ({protocol, cipher} or null) on inbound and captured messages", async () => {
    const doc = (await api.call("GET", "/api/openapi.json")).body
    const resolve = (node: any): any => (node && typeof node.$ref === "string" ? resolve(doc.components.schemas[node.$ref.split("/").pop()]) : node)
    for (const path of ["/api/inbound/messages/{id}", "/api/sandbox/messages/{id}"]) {
      const envelope = resolve(doc.paths[path].get.responses["200"].content["application/json"].schema)
      const message = resolve(envelope.properties.data)
      expect(message.required, path).toContain("tls")
      const tls = JSON.stringify(message.properties.tls, (_k, v) => resolve(v))
      expect(tls, path).toMatch(/"protocol"/)
      expect(tls, path).toMatch(/"cipher"/)
      expect(tls, path).toMatch(/"null"/)
    }
  })
})
