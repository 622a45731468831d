/**
 * Helpers for the billing tests: signed gateway events, top-ups created through the API, and the
 * ledger invariant (balance = sum of ledger entries, never negative) checked over every wallet.
 */
import { Effect } from "effect"
import { expect } from "vitest"
import { Database } from "../../effects/ports/Database.ts"
import { hmacSha256Hex, randomHexSync } from "../../effects/shared/crypto.ts"
import type { TestAccount } from "../support/accounts.ts"
import type { CallResult, TestApp } from "../support/app.ts"

export const EVENTS = "/api/billing/payments/events"

export interface EventInput {
  readonly id?: string
  readonly event?: string
  readonly provider_reference: string
  readonly amount_tzs: number
  readonly occurred_at?: string
}

export const eventBody = (e: EventInput): string =>
  JSON.stringify({
    id: e.id ?? `evt_${randomHexSync(8)}`,
    event: e.event ?? "payment.completed",
    provider_reference: e.provider_reference,
    amount_tzs: e.amount_tzs,
    occurred_at: e.occurred_at ?? new Date().toISOString(),
  })

export const sign = (api: TestApp, raw: string): Promise<string> =>
  Effect.runPromise(hmacSha256Hex(api.settings.paymentWebhookSecret, raw))

/** Posts a raw event body signed with the service's secret (or with the given signature). */
export const postEvent = async (api: TestApp, raw: string, signature?: string | null): Promise<CallResult> => {
  const sig = signature === undefined ? await sign(api, raw) : signature
  return api.call("POST", EVENTS, {
    rawBody: raw,
    headers: { "content-type": "application/json", ...(sig === null ? {} : { "x-gateway-signature": sig }) },
  })
}

/** A pending checkout top-up created over HTTP. */
export const createTopup = async (api: TestApp, account: TestAccount, amount = 5000) => {
  const res = await api.call("POST", "/api/billing/topup", { token: account.apiKey, body: { amount_tzs: amount } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data as {
    topup: { id: number; amount_tzs: number; status: string; provider_reference: string; expires_at: string }
    checkout_url: string
    payment_link_url: string
    provider_reference: string
  }
}

export const balanceOf = async (api: TestApp, account: TestAccount): Promise<number> => {
  const res = await api.call("GET", "/api/billing/balance", { token: account.apiKey })
  expect(res.status).toBe(200)
  return res.body.data.balance_tzs
}

export const query = <T>(api: TestApp, sql: string, params: ReadonlyArray<unknown> = []) =>
  api.run(Effect.gen(function*() {
    const db = yield* Database
    return yield* db.query<T>(sql, params)
  }))

/** Every wallet equals the sum of its ledger, and none is negative (the ledger's invariant). */
export const expectLedgerConsistent = async (api: TestApp) => {
  const broken = await query<{ user_id: number }>(api, `
    SELECT u.id AS user_id
      FROM users u
      LEFT JOIN wallets w ON w.user_id = u.id
      LEFT JOIN (SELECT user_id, sum(amount_tzs) AS s FROM ledger_entries GROUP BY user_id) l ON l.user_id = u.id
     WHERE COALESCE(w.balance_tzs, 0) <> COALESCE(l.s, 0) OR COALESCE(w.balance_tzs, 0) < 0`)
  expect(broken).toEqual([])
}
