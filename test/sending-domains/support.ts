/**
 * Helpers of the sending-domain tests: the app on a loopback DNS server, creating domains over
 * HTTP, publishing their records, and one step of the re-check worker under a test clock.
 */
import { type Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import { expect } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { sendingDomainRecheckWorker } from "../../src/workers/sending-domains.ts"
import { runOnce } from "../../src/workers/worker.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer } from "../support/dns-server.ts"

export interface DnsRecord {
  readonly type: "TXT"
  readonly host: string
  readonly value: string
}

export interface SendingDomain {
  readonly id: number
  readonly domain: string
  readonly purpose: "sending"
  readonly status: "pending" | "verified" | "suspended"
  readonly from_local_part: string
  readonly verified_at: string | null
  readonly created_at: string
  readonly dns_records: Array<DnsRecord>
}

export interface SendingTestApp {
  readonly api: TestApp
  readonly dns: TestDnsServer
  readonly stop: () => Promise<void>
}

export const startSendingApp = async (): Promise<SendingTestApp> => {
  const dns = await startDnsServer()
  const api = await makeTestApp({ workers: false, settings: { dnsServers: [dns.address], domainRecheckInterval: "1 hour" as never } })
  return {
    api,
    dns,
    stop: async () => {
      await api.stop()
      await dns.close()
    },
  }
}

export const unique = (p: string) => `${p}-${Math.random().toString(16).slice(2, 8)}.co.tz`

export const addDomain = async (app: SendingTestApp, apiKey: string, body: Record<string, unknown>) => {
  const r = await app.api.call("POST", "/api/domains/", { token: apiKey, body })
  expect(r.status, JSON.stringify(r.body)).toBe(201)
  return r.body.data as { domain: SendingDomain; dns_records: Array<DnsRecord> }
}

export const verify = (app: SendingTestApp, apiKey: string, id: number) =>
  app.api.call("POST", `/api/domains/${id}/verify`, { token: apiKey })

/** Publishes the records the API asked for (TXT values longer than 255 go out in several strings). */
export const publish = (app: SendingTestApp, records: ReadonlyArray<DnsRecord>) => {
  for (const r of records) app.dns.set(r.host, "TXT", [r.value])
}

/** An account with a domain whose records are published and verified. */
export const verifiedDomain = async (app: SendingTestApp, body: Record<string, unknown> = {}) => {
  const account = await createAccount(app.api)
  const created = await addDomain(app, account.apiKey, { domain: unique("duka"), ...body })
  publish(app, created.dns_records)
  const v = await verify(app, account.apiKey, created.domain.id)
  expect(v.body.data.status).toBe("verified")
  return { ...account, domain: v.body.data as SendingDomain }
}

/** One round of the re-check worker, `ahead` past now (so every verified domain is due). */
export const recheck = (app: SendingTestApp, ahead: Duration.Input = "2 hours") =>
  app.api.run(
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      yield* TestClock.adjust(ahead)
      return yield* runOnce(sendingDomainRecheckWorker("1 hour"))
    }).pipe(Effect.provide(TestClock.layer())),
  )

export const query = <T = Record<string, unknown>>(app: SendingTestApp, sql: string, params: ReadonlyArray<unknown> = []) =>
  app.api.run(Database.use((db) => db.query<T>(sql, params)))
