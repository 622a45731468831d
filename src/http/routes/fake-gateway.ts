/**
 * The embedded fake gateway's checkout page. The routes are served only while the fake is the
 * payment provider (`routesFor` in ./index.ts), and the page says it is a development stand-in.
 * Plain HTML forms, no script: "Pay" and "Fail" post back here, and the fake gateway delivers its
 * signed event to the service's own event endpoint. Not part of the public API.
 */
import { Effect, Option, Schema } from "effect"
import { NotFound } from "../../../effects/errors.ts"
import { escapeHtml } from "../../../effects/shared/html.ts"
import { type Delivery, FAKE_CHECKOUT_PATH, FakeGateway, type FakeGatewayPayment } from "../../providers/payment-fake.ts"
import { ok, route } from "../route.ts"

const Params = Schema.Struct({ reference: Schema.String.check(Schema.isPattern(/^fake_[0-9a-f]{24}$/)) })

const tzs = (n: number) => `TZS ${n.toLocaleString("en-US")}`

const STATUS_TEXT: Record<FakeGatewayPayment["status"], string> = {
  open: "Waiting for payment",
  paid: "Paid",
  failed: "Failed",
  expired: "Expired (the link was used after its expiry)",
}

const deliveryText = (d: Delivery) =>
  d.ok
    ? `The merchant was notified: HTTP ${d.status}, ${escapeHtml(d.outcome ?? "accepted")}.`
    : `Notifying the merchant failed (${d.status === null ? "no answer" : `HTTP ${d.status}`}: ${escapeHtml(d.error)}). ` +
      "Press the button again to re-send the event."

export const checkoutPage = (p: FakeGatewayPayment, delivery?: Delivery): string => {
  const action = `${FAKE_CHECKOUT_PATH}/${escapeHtml(p.provider_reference)}`
  const buttons = p.status === "open"
    ? `<form method="post" action="${action}/pay"><button class="pay" type="submit">Pay ${tzs(p.amount_tzs)}</button></form>
       <form method="post" action="${action}/fail"><button class="fail" type="submit">Fail the payment</button></form>`
    : `<form method="post" action="${action}/pay"><button type="submit">Re-send the event (same id)</button></form>`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Fake payment gateway</title>
<style>
 body{font-family:system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem;color:#222}
 .card{border:1px solid #ddd;border-radius:8px;padding:1.5rem}
 .amount{font-size:2rem;font-weight:600;margin:.5rem 0}
 dl{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem;font-size:.9rem} dt{color:#666}
 form{display:inline-block;margin:1rem .5rem 0 0} button{font-size:1rem;padding:.6rem 1.2rem;border-radius:6px;border:1px solid #999;cursor:pointer}
 .pay{background:#1a7f37;color:#fff;border-color:#1a7f37} .fail{background:#fff;color:#b42318;border-color:#b42318}
 .note{font-size:.85rem;color:#666} .result{margin-top:1rem;padding:.75rem;background:#f5f5f5;border-radius:6px}
</style></head>
<body><div class="card">
<p class="note" id="stand-in">Fake payment gateway: a development stand-in for a real payment gateway
(PAYMENT_PROVIDER=fake). No money moves; anyone who opens this page can complete the payment.</p>
<div class="amount">${tzs(p.amount_tzs)}</div>
<dl>
 <dt>Status</dt><dd id="status" data-status="${p.status}">${STATUS_TEXT[p.status]}</dd>
 <dt>Channel</dt><dd>${p.channel === "ussd_push" ? `USSD push to ${escapeHtml(p.phone_number ?? "")}` : "Card or mobile money"}</dd>
 <dt>Merchant reference</dt><dd>${escapeHtml(p.reference)}</dd>
 <dt>Gateway reference</dt><dd>${escapeHtml(p.provider_reference)}</dd>
 <dt>Link valid until</dt><dd>${p.expires_at.toISOString()}</dd>
</dl>
${delivery ? `<div class="result" id="delivery">${deliveryText(delivery)}</div>` : ""}
${buttons}
</div></body></html>`
}

const html = (body: string) => ok(undefined, { raw: { body, contentType: "text/html; charset=utf-8" } })

/** The fake gateway, or 404 when a live gateway is configured. */
const fakeGateway = Effect.flatMap(
  Effect.serviceOption(FakeGateway),
  Option.match({
    onNone: () => Effect.fail(new NotFound({ message: "the fake gateway is off: a live payment gateway is configured" })),
    onSome: Effect.succeed,
  }),
)

const press = (action: "pay" | "fail") =>
  route({
    method: "post",
    path: `${FAKE_CHECKOUT_PATH}/:reference/${action}`,
    auth: "none",
    tag: "Fake gateway",
    summary: action === "pay" ? "Complete the fake payment" : "Fail the fake payment",
    params: Params,
    internal: true,
    handler: ({ params }) =>
      Effect.gen(function*() {
        const fake = yield* fakeGateway
        const { payment, delivery } = yield* fake.press(params.reference, action)
        return html(checkoutPage(payment, delivery))
      }),
  })

export const fakeGatewayRoutes = [
  route({
    method: "get",
    path: `${FAKE_CHECKOUT_PATH}/:reference`,
    auth: "none",
    tag: "Fake gateway",
    summary: "The fake gateway's checkout page",
    params: Params,
    internal: true,
    handler: ({ params }) =>
      Effect.gen(function*() {
        const fake = yield* fakeGateway
        const payment = yield* fake.find(params.reference)
        if (Option.isNone(payment)) return yield* new NotFound({ message: "no such payment at the fake gateway" })
        return html(checkoutPage(payment.value))
      }),
  }),
  press("pay"),
  press("fail"),
]
