/**
 * The webhook worker woken at commit, with the real loop and real time: a stored message's
 * delivery starts at once, and one slow receiver never holds up the rest (the loop claims again
 * as soon as a slot is free and a commit woke it, instead of waiting for its whole last round).
 * The worker's poll is set to ten minutes here, so only the commit can start a delivery within
 * the seconds these tests wait: a lost wake-up fails them every time, not only when a 2 s poll
 * happens to come late.
 */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebhookDeliveryOptions } from "../../effects/webhooks/transport.ts"
import { webhookWorkerSpec } from "../../src/workers/webhooks.ts"
import { createAccount } from "../support/accounts.ts"
import { makeTestApp, type TestApp } from "../support/app.ts"
import { createAddress, storeMessage } from "../support/inbound-fixtures.ts"
import { answer, startReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts"

let app: TestApp
const receivers: Array<WebhookReceiver> = []
beforeAll(async () => {
  app = await makeTestApp({
    infrastructure: Layer.succeed(WebhookDeliveryOptions, { timeout: "10 seconds", pollInterval: "10 minutes" }) as Layer.Layer<never>,
  })
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
  it("polls every ten minutes in this file (the option reaches the worker), two seconds by default", async () => {
    expect((await app.run(webhookWorkerSpec())).pollInterval).toBe("10 minutes")
    const standard = await app.run(webhookWorkerSpec().pipe(Effect.provideService(WebhookDeliveryOptions, { timeout: "10 seconds" })))
    expect(standard.pollInterval).toBe("2 seconds")
  })

  it("delivers a message stored while another receiver hangs, without waiting for it", async () => {
    const slow = await hooked({ kind: "hang" })
    const fast = await hooked(answer(200))
    await storeMessage(app, { userId: slow.account.userId, addressId: slow.addressId })
    // The hanging delivery is under way (it would hold the worker until its 10 s deadline).
    await slow.receiver.waitFor(1, 5_000)
    const stored = Date.now()
    await storeMessage(app, { userId: fast.account.userId, addressId: fast.addressId })
    const [got] = await fast.receiver.waitFor(1, 5_000)
    // Started by the commit (the poll is minutes away), and soon: well under the slow receiver's
    // 10 s deadline.
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
    // The poll is minutes away, so every delivery came from its commit; each within 1.5 s of it.
    expect(Math.max(...lags)).toBeLessThan(1_500)
  })
})
