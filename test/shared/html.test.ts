/** The one HTML escape (effects/shared/html.ts) and the three places that write HTML with it. */
import { describe, expect, it } from "vitest"
import { escapeHtml } from "../../effects/shared/html.ts"
import { renderHtml } from "../../effects/templates/render.ts"
import { docsPage } from "../../src/http/openapi.ts"
import type { Route } from "../../src/http/route.ts"
import { checkoutPage } from "../../src/http/routes/fake-gateway.ts"
import type { FakeGatewayPayment } from "../../src/providers/payment-fake.ts"

const HOSTILE = `<img src=x onerror="alert('x')">&amp;`
const ESCAPED = "&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&amp;amp;"

describe("escapeHtml", () => {
  it("escapes the five characters that end text or a quoted attribute, and nothing else", () => {
    expect(escapeHtml(HOSTILE)).toBe(ESCAPED)
    expect(escapeHtml(`&<>"'`)).toBe("&amp;&lt;&gt;&quot;&#39;")
    expect(escapeHtml("Habari, Dar es Salaam — TZS 5,000 ✓")).toBe("Habari, Dar es Salaam — TZS 5,000 ✓")
    expect(escapeHtml("")).toBe("")
  })
})

describe("its call sites", () => {
  it("template HTML bodies escape {{values}}", () => {
    expect(renderHtml("<p>{{name}}</p>", { name: HOSTILE })).toBe(`<p>${ESCAPED}</p>`)
  })

  it("the /docs page escapes tags, paths and summaries", () => {
    const page = docsPage([{ method: "get", path: "/api/x", auth: "none", tag: `T<"'>`, summary: HOSTILE } as unknown as Route])
    expect(page).toContain(`<h2>T&lt;&quot;&#39;&gt;</h2>`)
    expect(page).toContain(ESCAPED)
    expect(page).not.toContain("<img")
  })

  it("the fake gateway page escapes references, the phone number and the merchant's answer", () => {
    const payment: FakeGatewayPayment = {
      provider_reference: `fake_"><script>`,
      reference: HOSTILE,
      amount_tzs: 2000,
      channel: "ussd_push",
      phone_number: "<b>0713</b>",
      callback_url: "http://localhost/cb",
      expires_at: new Date(0),
      status: "open",
      event_id: null,
      event_body: null,
      created_at: new Date(0),
    }
    const page = checkoutPage(payment, { ok: false, status: 500, error: "<i>down</i>" })
    expect(page).toContain(ESCAPED)
    expect(page).toContain("fake_&quot;&gt;&lt;script&gt;/pay")
    expect(page).toContain("USSD push to &lt;b&gt;0713&lt;/b&gt;")
    expect(page).toContain("&lt;i&gt;down&lt;/i&gt;")
    expect(page).not.toMatch(/<script>|<img|<b>|<i>/)
  })
})
