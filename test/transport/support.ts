/**
 * Helpers of the transport tests: bounce fixtures, a message sent through the test relay with
 * each recipient's VERP return path as the relay saw it, and the Bounces service called the way
 * the MX will call it.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { expect } from "vitest"
import { type BounceOutcome, Bounces } from "../../effects/bounces/service.ts"
import type { VerpRecipient } from "../../effects/bounces/verp.ts"
import type { TestAccount } from "../support/accounts.ts"
import type { TestApp } from "../support/app.ts"
import { send, type TestRelay } from "../outbound/support.ts"

export const bounceFixture = (name: string): Buffer => fs.readFileSync(path.join("fixtures/mail/bounces", name))

export interface SentMessage {
  readonly id: number
  /** MAIL FROM the relay saw for each recipient, by recipient address (as given). */
  readonly returnPaths: ReadonlyMap<string, string>
}

/** Sends one message to `to` through the relay and reads back each recipient's return path. */
export const sendThroughRelay = async (api: TestApp, relay: TestRelay, account: TestAccount, to: ReadonlyArray<string>): Promise<SentMessage> => {
  const before = relay.received.length
  const res = await send(api, account, { to, subject: "Ankara ya Novemba", text_body: "Ankara yako iko tayari." })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  const mine = relay.received.slice(before)
  expect(mine).toHaveLength(to.length)
  return { id: res.body.data.id, returnPaths: new Map(mine.map((r) => [r.to[0]!, r.from])) }
}

export const parseReturnPath = (api: TestApp, address: string) => api.run(Bounces.use((b) => b.parseReturnPath(address)))

/** What the MX does at the end of DATA for a return-path recipient. */
export const feedBounce = (api: TestApp, returnPath: string, raw: Uint8Array, mailFrom = ""): Promise<BounceOutcome> =>
  api.run(Effect.gen(function*() {
    const bounces = yield* Bounces
    const recipient: VerpRecipient = yield* bounces.parseReturnPath(returnPath)
    return yield* bounces.process({ raw, mailFrom, recipient })
  }))
