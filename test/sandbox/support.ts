/**
 * Helpers of the sandbox tests: an app (real HTTP and SMTP sockets, port 0), credentials and the
 * SMTP login created over HTTP, nodemailer transports signed in with them, and database peeks.
 */
import { type Layer } from "effect"
import nodemailer from "nodemailer"
import { expect } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { connectSmtp, type RawSmtp } from "../support/smtp-client.ts"

export interface SandboxTestApp {
  readonly api: TestApp
  /** The sandbox listener's port. */
  readonly port: number
  readonly stop: () => Promise<void>
}

export const startSandboxApp = async (
  options: { readonly infrastructure?: Layer.Layer<never, never, never> | Layer.Layer<any, never, never> } = {},
): Promise<SandboxTestApp> => {
  const api = await makeTestApp({ workers: false, ...(options.infrastructure ? { infrastructure: options.infrastructure } : {}) })
  return { api, port: api.ports.sandbox!, stop: () => api.stop() }
}

export interface Credential {
  readonly id: number
  readonly client_id: string
  readonly client_secret: string
  readonly client_secret_prefix: string
  readonly scopes: string
  readonly status: string
  readonly created_at: string
}

export const createCredential = async (api: TestApp, apiKey: string, body: Record<string, unknown> = {}): Promise<Credential> => {
  const r = await api.call("POST", "/api/sandbox/credentials", { token: apiKey, body })
  expect(r.status, JSON.stringify(r.body)).toBe(201)
  return r.body.data
}

/** The account's SMTP login; the first call shows the password. */
export const smtpLogin = async (api: TestApp, apiKey: string) => {
  const r = await api.call("GET", "/api/sandbox/credentials/smtp", { token: apiKey })
  expect(r.status, JSON.stringify(r.body)).toBe(200)
  return r.body.data as { host: string; port: number; username: string; password?: string }
}

export const transport = (port: number, user: string, pass: string, extra: { authMethod?: string } = {}) =>
  nodemailer.createTransport({ host: "127.0.0.1", port, secure: false, ignoreTLS: true, auth: { user, pass }, ...extra })

/** A raw session that has said EHLO and signed in with AUTH PLAIN. */
export const signedIn = async (port: number, user: string, pass: string): Promise<RawSmtp> => {
  const smtp = await connectSmtp(port)
  expect((await smtp.command("EHLO app.example.net")).code).toBe(250)
  const auth = await smtp.command(`AUTH PLAIN ${plain(user, pass)}`)
  expect(auth.code, auth.text).toBe(235)
  return smtp
}

export const plain = (user: string, pass: string) => Buffer.from(`\u0000${user}\u0000${pass}`).toString("base64")

export const query = <T = Record<string, unknown>>(api: TestApp, sql: string, params: ReadonlyArray<unknown> = []) =>
  api.run(Database.use((db) => db.query<T>(sql, params)))

export const capturedCount = async (api: TestApp, userId: number): Promise<number> => {
  const [row] = await query<{ n: number }>(api, "SELECT count(*)::int AS n FROM sandbox_messages WHERE user_id = $1", [userId])
  return row!.n
}

/** The id in a `250 2.0.0 OK: captured as N` reply. */
export const capturedId = (response: string): number => Number(/captured as (\d+)/.exec(response)![1])
