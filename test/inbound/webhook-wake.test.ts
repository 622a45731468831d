/**
 * The webhook worker woken at commit, with the real loop and real time: a stored message's
 * delivery starts at once, and one slow receiver never holds up the rest (the loop claims again
 * as soon as a slot is free and a commit woke it, instead of waiting for its whole last round).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessage } from "../support/inbound-fixtures.ts"
import { answer, startReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts"

let app: TestApp
const receivers: Array<WebhookReceiver> = []
beforeAll(async () => {
  app = await makeTestApp()
})
afterAll(async () => {
  await app.stop()
  await Promise.all(receivers.map((r) => r.close()))
})

const hooked = async (...behaviour: Parameters<typeof startReceiver>) => {
  const receiver = await startReceiver(...behaviour)
  receivers.push(receiver)
  const account = await createAccount(app)
  const addressId = await createAddress(app, account.userId)
  const res = await app.call("POST", "/api/webhook/webhooks", { token: account.apiKey, body: { address_id: addressId, url: receiver.url } })
  expect(res.status).toBe(201)
  return { receiver, account, addressId }
}

describe("the webhook worker", () => {
  it("delivers a message stored while another receiver hangs, without waiting for it", async () => {
    const slow = await hooked({ kind: "hang" })
    const fast = await hooked(answer(200))
    await storeMessage(app, { userId: slow.account.userId, addressId: slow.addressId })
    // The hanging delivery is under way (it would hold the worker until its 10 s deadline).
    await slow.receiver.waitFor(1, 5_000)
    const stored = Date.now()
    await storeMessage(app, { userId: fast.account.userId, addressId: fast.addressId })
    const [got] = await fast.receiver.waitFor(1, 5_000)
    // Woken by the commit: well under the 2 s poll and the slow receiver's 10 s deadline.
    expect(got!.at - stored).toBeLessThan(1_500)
  })

  it("starts each delivery at its commit, not at the next poll", async () => {
    const { receiver, account, addressId } = await hooked(answer(200))
    const lags: Array<number> = []
    for (let i = 0; i < 5; i++) {
      const stored = Date.now()
      await storeMessage(app, { userId: account.userId, addressId, subject: `m${i}` })
      const got = await receiver.waitFor(i + 1, 5_000)
      lags.push(got[i]!.at - stored)
    }
    // The poll is every 2 s: five messages in a row would take seconds if the wake-up were lost.
    expect(Math.max(...lags)).toBeLessThan(1_500)
  })
})
