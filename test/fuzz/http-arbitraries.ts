/**
 * fast-check generators for hostile HTTP requests, derived from a route declaration (its method,
 * path parameters, query and body schemas): mostly plausible requests with a few fields made
 * hostile (so handlers are reached, not just the decoder), and now and then a body that is
 * hostile as a whole (wrong type, deep nesting, malformed JSON, huge).
 */
import fc from "fast-check"
import type { Route } from "../../src/http/route.ts"

/** What a fuzz request may point at: resources that exist for the fuzzing account. */
export interface FuzzWorld {
  readonly addressId: number
  readonly templateId: number
  readonly webhookId: number
  readonly domainId: number
  readonly receivingDomainId: number
  readonly messageId: number
  readonly smsRuleId: number
  readonly topupId: number
  /** Ids the fuzz may delete or revoke (never the key it authenticates with). */
  readonly spareKeyId: number
  readonly receiverUrl: string
  readonly fakeReference: string
}

export interface FuzzRequest {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  /** Sent as is (JSON or not). */
  readonly body: string | undefined
  /** For the report: what made it hostile. */
  readonly note: string
}

// ---- values ----------------------------------------------------------------------------------

/**
 * Percent-encodes any string, lone surrogates included (as the three bytes WTF-8 gives them,
 * which is invalid UTF-8 on the wire: exactly what a hostile client sends). encodeURIComponent
 * throws on those.
 */
export const encodeLoose = (s: string): string =>
  s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]|[^]/gu, (c) => {
    const u = c.charCodeAt(0)
    if (c.length === 1 && u >= 0xd800 && u <= 0xdfff) {
      return [0xe0 | (u >> 12), 0x80 | ((u >> 6) & 0x3f), 0x80 | (u & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join("")
    }
    return encodeURIComponent(c)
  })

const nastyUnits = [
  "\u0000", "\u0001", "\u0007", "\b", "\u000b", "\u001b", "\u001f", "\u007f", "\u0085", "\u00a0", "\ud800", "\udbff", "\udc00",
  "\udfff", "\ufeff", "\ufffd", "\uffff", "\u202e", "\u2028", "\u2029", "\r", "\n", "\t", "\r\n", "%", "%00", "%25", "'", "\"",
  "\\", "<", ">", "&", "{{", "}}", "{{{", "$1", "../", "@", ",", ";", "😀", "👩🏾‍💻", "é", "e\u0301", "ß", "İ", "ـ", "𝕏", "日本",
]

const nastyString = fc.string({ unit: fc.oneof(fc.constantFrom(...nastyUnits), fc.string({ unit: "binary", minLength: 1, maxLength: 1 })), maxLength: 40 })

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: nastyString },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 30 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "",
      " ",
      "a".repeat(300),
      "a".repeat(70_000),
      "é".repeat(40_000),
      "\u0000".repeat(500),
      "a@example.co.tz\u0000",
      "Asha <a@example.co.tz>\r\nBcc: x@evil.test",
      "a".repeat(64) + "@" + "b".repeat(250) + ".tz",
      "2030-02-31T25:61:61Z",
      "+2557123456789999",
      "null",
      "true",
      "1e309",
      "-0",
      "NaN",
      "Infinity",
      "__proto__",
      "constructor",
    ),
  },
)

export const hostileNumber: fc.Arbitrary<number> = fc.oneof(
  fc.integer(),
  fc.constantFrom(0, -0, -1, 1.5, -2.5, 1e-300, 1e21, 1e308, -1e308, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 2 ** 63, -(2 ** 63), Number.MAX_SAFE_INTEGER),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
)

export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 3, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.array(fc.oneof(hostileString, hostileNumber, fc.constant(null)), { maxLength: 6 }) },
  { weight: 1, arbitrary: fc.dictionary(hostileString, fc.oneof(hostileString, hostileNumber), { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom(Array.from({ length: 500 }, (_, i) => `r${i}@example.co.tz`), Array(60).fill({}), [[[[[[[[[[]]]]]]]]]]) },
)

// ---- plausible values by field name: they get a request past the decoder to the handler -------

const plausible = (w: FuzzWorld): Record<string, fc.Arbitrary<unknown>> => {
  const unique = fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789"), minLength: 4, maxLength: 10 })
  return {
    name: fc.constantFrom("Asha Mwinyi", "Kilimanjaro", "n"),
    password: fc.constant("a long password"),
    company_name: fc.constantFrom("Kili Ltd", null),
    email: unique.map((u) => `${u}@example.co.tz`),
    phone_number: fc.constantFrom("+255712345678", "0755123456"),
    identifier: fc.constantFrom("asha@example.co.tz", "+255712345678"),
    id_token: fc.constantFrom("eyJhbGciOiJSUzI1NiJ9.e30.sig", "a.b.c"),
    refresh_token: fc.constantFrom("rt_0123456789abcdef", "rt_"),
    token: fc.constantFrom("t.t.t", "x"),
    code: fc.constantFrom("123456", "000000"),
    scopes: fc.constantFrom("full", "inbound:read,billing:read", "smtp", "smtp:verify"),
    expires_at: fc.constantFrom("2030-01-01T00:00:00Z", "2031-06-30", null),
    local_part: unique,
    label: fc.constantFrom("Support", null),
    domain_id: fc.constantFrom(null, w.receivingDomainId),
    to: unique.map((u) => [`${u}@example.co.tz`]),
    cc: fc.constantFrom([], ["cc@example.co.tz"]),
    bcc: fc.constantFrom([], ["Bcc Person <bcc@example.co.tz>"]),
    subject: fc.constantFrom("Receipt {{n}}", "Hi"),
    html_body: fc.constantFrom("<p>Habari {{name}}</p>", "<b>x"),
    text_body: fc.constantFrom("Asante\r\n", "x"),
    attachments: fc.constantFrom([], [{ filename: "a.txt", content_type: "text/plain", data_base64: "aGk=" }]),
    template_id: fc.constantFrom(w.templateId, null),
    variables: fc.constantFrom({ name: "Asha" }, {}),
    from_domain_id: fc.constantFrom(null, w.domainId),
    from_address: fc.constantFrom("noreply@inbox.localhost", null),
    url: fc.constantFrom(w.receiverUrl, "https://example.co.tz/hook"),
    secret: fc.constantFrom("a-secret-of-length", undefined),
    is_active: fc.boolean(),
    address_id: fc.constantFrom(w.addressId, w.addressId),
    mode: fc.constantFrom("off", "draft", "auto"),
    enabled: fc.boolean(),
    persona: fc.constantFrom("Sign as Zawadi.", null),
    reply_from_domain_id: fc.constantFrom(null, w.domainId),
    reply_from_address: fc.constantFrom(null, "noreply@inbox.localhost"),
    amount_tzs: fc.constantFrom(2000, 5000),
    domain: unique.map((u) => `${u}.example.co.tz`),
    from_local_part: fc.constantFrom("noreply", "hello"),
    provider_key: fc.constantFrom("sms-key-123456"),
    pdpc_registered: fc.boolean(),
    pdpc_certificate_number: fc.constantFrom("PDPC/2026/1", null),
    pdpc_registered_at: fc.constantFrom("2026-01-31", null),
    default_retention_days: fc.constantFrom(30, 1, 3650),
    data_consent_at: fc.constantFrom("2026-01-31T09:00:00Z", null),
    privacy_policy_version: fc.constantFrom("v1", null),
  }
}

/**
 * Values at the edge of what validation accepts (longest, widest Unicode, most items): they pass
 * the decoder, so what they test is everything behind it, down to the database.
 */
const edgy = (w: FuzzWorld): Record<string, fc.Arbitrary<unknown>> => ({
  name: fc.constantFrom("é".repeat(200), "😀".repeat(100), "\u00a0Asha\u00a0", "ـ".repeat(200)),
  company_name: fc.constantFrom("ß".repeat(200), "\u202eevil"),
  label: fc.constantFrom("😀".repeat(100), "e\u0301".repeat(100), "\ufeff"),
  subject: fc.constantFrom("😀".repeat(499), "a".repeat(998), `{{${"x".repeat(900)}}}`, "\u2028"),
  text_body: fc.constantFrom("x".repeat(1_000_000), "\r\n".repeat(20_000), "e\u0301".repeat(50_000), "{{a}}".repeat(20_000)),
  html_body: fc.constantFrom("<p>".repeat(50_000), "<!--".repeat(20_000), `<a href="${"x".repeat(100_000)}">`, "<style>".repeat(30_000)),
  variables: fc.constantFrom(
    Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, "v"])),
    { "": "x", " ": "y" },
    { a: "b".repeat(200_000) },
    { "__proto__": "x", constructor: "y", toString: "z" },
  ),
  to: fc.constantFrom(
    Array.from({ length: 50 }, (_, i) => `Ünïcødé ${i} <u${i}@example.co.tz>`),
    ['"quoted, name" <q@example.co.tz>'],
    [`${"a".repeat(64)}@${"b".repeat(60)}.co.tz`],
    ["UPPER@EXAMPLE.CO.TZ", "upper@example.co.tz"],
  ),
  cc: fc.constantFrom(Array.from({ length: 25 }, (_, i) => `c${i}@example.co.tz`)),
  attachments: fc.constantFrom(
    Array.from({ length: 10 }, (_, i) => ({ filename: `${"é".repeat(100)}${i}.bin`, content_type: "application/octet-stream", data_base64: "AAAA" })),
    [{ filename: "big.bin", content_type: "application/octet-stream", data_base64: Buffer.alloc(1024 * 1024).toString("base64") }],
    [{ filename: "a.txt", content_type: "text/plain", size: 0, data_base64: "" }],
  ),
  local_part: fc.constantFrom("a".repeat(64), "-", "0", "postmaster", "abuse"),
  domain: fc.constantFrom(`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.co.tz`, "xn--mgbh0fb.xn--kgbechtv", "EXAMPLE.CO.TZ."),
  persona: fc.constantFrom("p".repeat(4000), "\n".repeat(4000)),
  amount_tzs: fc.constantFrom(1_000_000_000, 2000),
  default_retention_days: fc.constantFrom(3650, 1),
  expires_at: fc.constantFrom("2999-12-31T23:59:59Z", "1970-01-01", "2024-02-29T00:00:00+14:00"),
  pdpc_registered_at: fc.constantFrom("0001-01-01", "9999-12-31", "2024-02-29"),
  data_consent_at: fc.constantFrom("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999+14:00"),
  pdpc_certificate_number: fc.constantFrom("x".repeat(100), "\t\r\n"),
  secret: fc.constantFrom("s".repeat(256), "\u00e9".repeat(256)),
  url: fc.constantFrom(`https://example.co.tz/${"p".repeat(2000)}`, "http://[::1]:1/x", "https://user:pass@example.co.tz:65535/"),
  address_id: fc.constantFrom(w.addressId, Number.MAX_SAFE_INTEGER),
  template_id: fc.constantFrom(Number.MAX_SAFE_INTEGER, w.templateId),
})

const fieldsOf = (schema: unknown): Array<string> => Object.keys((schema as { fields?: object } | undefined)?.fields ?? {})

/** A body for `route`: plausible fields, a few made hostile, sometimes hostile as a whole. */
const bodyFor = (route: Route, w: FuzzWorld): fc.Arbitrary<{ body: string; note: string }> => {
  const fields = fieldsOf(route.body)
  const known = plausible(w)
  const fieldValue = (f: string) => known[f] ?? hostileValue
  const object = fc.record(Object.fromEntries(fields.map((f) => [f, fc.option(fieldValue(f), { nil: undefined, freq: 4 })])))
  const mutated = () =>
    fc.tuple(object, fc.subarray(fields, { minLength: 1, maxLength: Math.min(3, Math.max(1, fields.length)) }), fc.array(hostileValue, { minLength: 3, maxLength: 3 }))
    .map(([base, pick, values]) => {
      const body: Record<string, unknown> = { ...base }
      pick.forEach((f, i) => (body[f] = values[i]))
      return { body: JSON.stringify(body), note: `hostile ${pick.join(", ")}` }
    })
  const extremes = edgy(w)
  // Plausible bodies with some fields at the edge of what is valid.
  const edges = () =>
    fc.record(Object.fromEntries(fields.map((f) => [f, fc.option(extremes[f] ?? fieldValue(f), { nil: undefined, freq: 4 })])))
      .map((b) => ({ body: JSON.stringify(b), note: "valid at the edges" }))
  const wholesale = fc.oneof(
    hostileValue.map((v) => ({ body: JSON.stringify(v) ?? "null", note: "body of the wrong type" })),
    fc.integer({ min: 100, max: 200_000 }).map((n) => ({
      body: `{"${fields[0] ?? "x"}":${"[".repeat(n)}${"]".repeat(n)}}`,
      note: `nested ${n} deep`,
    })),
    fc.constantFrom("{", "{\"a\":", "[1,2", "\u0000", "{\"a\":\"\\ud800\"}", "{\"a\":1}garbage", "\ufeff{}", "{\"__proto__\":{\"x\":1}}").map((raw) => ({
      body: raw,
      note: "malformed JSON",
    })),
    fc.constant({ body: JSON.stringify({ [fields[0] ?? "x"]: "a".repeat(2_000_000) }), note: "2 MB string" }),
    fc.dictionary(hostileString, hostileValue, { maxKeys: 40 }).map((d) => ({ body: JSON.stringify(d), note: "random keys" })),
  )
  return fields.length === 0
    ? fc.oneof({ weight: 3, arbitrary: fc.constant({ body: "", note: "no body" }) }, { weight: 1, arbitrary: wholesale })
    : fc.oneof({ weight: 6, arbitrary: mutated() }, { weight: 3, arbitrary: edges() }, { weight: 1, arbitrary: object.map((b) => ({ body: JSON.stringify(b), note: "plausible" })) }, {
      weight: 3,
      arbitrary: wholesale,
    })
}

const paramValue = (name: string, path: string, w: FuzzWorld): fc.Arbitrary<string> => {
  const existing = name === "reference"
    ? [w.fakeReference]
    : name === "email"
    ? ["a@example.co.tz"]
    : path.startsWith("/api/apikeys")
    ? [String(w.spareKeyId)]
    : [w.addressId, w.templateId, w.webhookId, w.domainId, w.receivingDomainId, w.messageId, w.smsRuleId, w.topupId].map(String)
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...existing) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        "0",
        "-1",
        "1.5",
        "1e3",
        "0x10",
        "99999999999999999999",
        "9007199254740993",
        "%00",
        "1%00",
        "%E0%A4%A",
        "%F0%9F%98%80",
        "%2e%2e%2f",
        "%20",
        "abc",
        "x".repeat(3000),
        "fake_0123456789abcdef01234567",
      ),
    },
    { weight: 2, arbitrary: hostileString.filter((s) => s !== "").map(encodeLoose) },
  )
}

const queryFor = (route: Route, w: FuzzWorld): fc.Arbitrary<string> => {
  const keys = [...fieldsOf(route.query), "page", "per_page"]
  const value = fc.oneof(
    fc.constantFrom("1", "20", "100", "101", "0", "-5", "1000000", "1000001", "1e309", "2.5", "", "true", "false", String(w.addressId)),
    hostileString.map(encodeLoose),
    fc.constantFrom("%", "%zz", "%00", "%ud800", "a&b", "=="),
  )
  const pair = fc.tuple(fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...keys) }, { weight: 1, arbitrary: hostileString.map(encodeLoose) }), value)
  return fc.array(pair, { maxLength: 5 }).map((pairs) => {
    const fixed = fieldsOf(route.query).includes("address_id") ? [["address_id", String(w.addressId)] as const] : []
    const all = [...fixed, ...pairs]
    return all.length ? "?" + all.map(([k, v]) => `${k}=${v}`).join("&") : ""
  })
}

/** Every request the fuzz may send to `route`, authenticated as the route requires. */
export const requestFor = (
  route: Route,
  w: FuzzWorld,
  credentials: { readonly apiKey: string; readonly token: string; readonly sign: (body: string) => string },
): fc.Arbitrary<FuzzRequest> => {
  const names = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => m[1]!)
  const params = fc.tuple(...names.map((n) => paramValue(n, route.path, w)))
  const auth = route.auth === "none"
    ? fc.constant<Record<string, string>>({})
    : route.auth === "jwt"
    ? fc.constant({ authorization: `Bearer ${credentials.token}` })
    : fc.constantFrom<Record<string, string>>(
      { "x-api-key": credentials.apiKey },
      { authorization: `Bearer ${credentials.apiKey}` },
      { authorization: `Bearer ${credentials.token}` },
    )
  const extraHeaders = fc.record({
    "content-type": fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"),
    "idempotency-key": fc.option(fc.constantFrom("k1", "k".repeat(300), "x y", "ключ"), { nil: undefined }),
  })
  const hasBody = route.method !== "get" && route.method !== "delete"
  return fc.tuple(params, queryFor(route, w), hasBody || route.rawBody ? bodyFor(route, w) : fc.constant({ body: "", note: "no body" }), auth, extraHeaders, fc.boolean())
    .map(([values, query, body, authHeaders, extra, signed]) => {
      let path = route.path
      names.forEach((n, i) => (path = path.replace(`:${n}`, values[i]!)))
      const headers: Record<string, string> = { ...authHeaders, "content-type": extra["content-type"] }
      // Non-Latin-1 header values cannot be sent at all; those cases test the client, not us.
      if (extra["idempotency-key"] !== undefined && /^[\x20-\xff]*$/.test(extra["idempotency-key"])) headers["idempotency-key"] = extra["idempotency-key"]
      // Signed payment events reach the event decoder (an unsigned one stops at the signature).
      if (route.rawBody && signed && body.body !== "") headers["x-gateway-signature"] = credentials.sign(body.body)
      return {
        method: route.method.toUpperCase(),
        path: path + query,
        headers,
        body: hasBody || route.rawBody ? body.body : undefined,
        note: body.note,
      }
    })
}
