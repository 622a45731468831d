/**
 * Inbound fixtures for the event-delivery tests: addresses and messages written with direct SQL
 * (only the columns of 004_inbound.sql that ingest guarantees), and a store step that calls the
 * MessageEvents subscribers exactly as ingest does: `stored` inside the storing transaction, and
 * what it answers run after the commit. Also a message as the ingest writer gets it
 * (`preparedFor`), for the batch-commit tests and bench/ingest-call.ts.
 */
import { Clock, Effect } from "effect"
import { MessageEvents, type StoredMessage } from "../../effects/ingest/events.ts"
import { prepareMessage, type PreparedMessage } from "../../effects/ingest/prepare.ts"
import type { Prepared } from "../../effects/ingest/store.ts"
import type { KeptResolver } from "../../effects/ingest/verdicts.ts"
import { Database } from "../../effects/ports/Database.ts"
import { randomHexSync } from "../../effects/shared/crypto.ts"
import type { TestApp } from "./app.ts"

export const createAddressEffect = (userId: number, localPart = `box-${randomHexSync(4)}`) =>
  Effect.gen(function*() {
    const db = yield* Database
    const [row] = yield* db.query<{ id: number }>(
      "INSERT INTO inbound_addresses (user_id, local_part) VALUES ($1, $2) RETURNING id",
      [userId, localPart],
    )
    return row!.id
  })

export const createAddress = (api: TestApp, userId: number, localPart?: string): Promise<number> =>
  api.run(createAddressEffect(userId, localPart))

export interface MessageInput {
  readonly userId: number
  readonly addressId: number
  readonly from?: string
  readonly to?: string
  readonly subject?: string
  readonly text?: string
}

/** Inserts a message and runs the subscribers the way ingest does. `failAfterStored` rolls it all back. */
export const storeMessageEffect = (input: MessageInput, options: { readonly failAfterStored?: boolean } = {}) =>
  Effect.gen(function*() {
    const db = yield* Database
    const events = yield* MessageEvents
    const at = new Date(Number(yield* Clock.currentTimeMillis))
    const { message, afterCommit } = yield* db.transaction(Effect.gen(function*() {
      const [row] = yield* db.query<{ id: number }>(
        `INSERT INTO inbound_messages (address_id, user_id, from_addr, to_addr, subject, text_body, headers, received_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
        [
          input.addressId,
          input.userId,
          input.from ?? "alice@example.co.tz",
          input.to ?? "box@inbox.localhost",
          input.subject ?? "Hello",
          input.text ?? "Body text",
          JSON.stringify({ subject: input.subject ?? "Hello" }),
          at,
          new Date(at.getTime() + 30 * 86_400_000),
        ],
      )
      const stored: StoredMessage = {
        id: row!.id,
        userId: input.userId,
        addressId: input.addressId,
        fromAddr: input.from ?? "alice@example.co.tz",
        toAddr: input.to ?? "box@inbox.localhost",
        subject: input.subject ?? "Hello",
        smsBody: input.text ?? "Body text",
        receivedAt: at,
      }
      const afterCommit = yield* events.stored([stored])
      if (options.failAfterStored) return yield* Effect.fail("rolled back on purpose" as const)
      return { message: stored, afterCommit }
    }))
    yield* afterCommit
    return message
  })

export const storeMessage = (api: TestApp, input: MessageInput): Promise<StoredMessage> => api.run(storeMessageEffect(input))

/** Every DNS question answered "no such record": the verdicts are `none`, nothing is asked on the network. */
export const noRecords: KeptResolver = async () => {
  throw Object.assign(new Error("no record"), { code: "ENOTFOUND" })
}

/** A message as the ingest writer gets it, prepared as the MX prepares it, for the given address copies. */
export const preparedFor = async (raw: string | Uint8Array, copies: ReadonlyArray<{ id: number; userId: number; email: string }>): Promise<Prepared<PreparedMessage>> => {
  const at = Date.now()
  const message = await prepareMessage({
    source: { _tag: "Memory", bytes: typeof raw === "string" ? Buffer.from(raw) : new Uint8Array(raw) },
    mailFrom: "asha@sender.example",
    client: { ip: "127.0.0.1", helo: "sender.example", tls: null },
    mta: "mx.inbox.localhost",
    id: "test",
    at,
  }, noRecords)
  return {
    destinations: copies.map((c) => ({ addressId: c.id, userId: c.userId, email: c.email, retentionDays: 30, rcpt: c.email })),
    message,
    at: new Date(at),
  }
}
