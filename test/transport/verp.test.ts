/**
 * VERP return paths as pure functions (effects/bounces/verp.ts): the documented format and tag,
 * round trips for any message and position, and every forgery refused.
 */
import { createHmac } from "node:crypto"
import { Option } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { looksLikeReturnPath, readReturnPath, returnPath } from "../../effects/bounces/verp.ts"

const key = { secret: new Uint8Array(32).map((_, i) => i * 7), domain: "inbox.localhost" }

describe("VERP return paths", () => {
  it("bounces+<email_id>.<recipient_index>.<first 10 hex of HMAC-SHA256(SECRETS_KEY, \"<email_id>.<recipient_index>\")>@platform", () => {
    const tag = createHmac("sha256", key.secret).update("1042.3").digest("hex").slice(0, 10)
    expect(returnPath(key, 1042, 3)).toBe(`bounces+1042.3.${tag}@inbox.localhost`)
  })

  it("reads back every message id and position, in any letter case", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 2 ** 50 }), fc.integer({ min: 0, max: 999 }), fc.boolean(), (id, index, upper) => {
      const path = returnPath(key, id, index)
      expect(readReturnPath(key, upper ? path.toUpperCase() : path)).toEqual(Option.some({ emailId: id, recipientIndex: index }))
      expect(looksLikeReturnPath(key, path)).toBe(true)
    }))
  })

  it("refuses any changed character of the tag, and another message's or position's tag", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: 0, max: 49 }), fc.integer({ min: 0, max: 9 }), (id, index, at) => {
      const path = returnPath(key, id, index)
      const tag = /\.([0-9a-f]{10})@/.exec(path)![1]!
      const changed = tag.slice(0, at) + (tag[at] === "a" ? "b" : "a") + tag.slice(at + 1)
      expect(Option.isNone(readReturnPath(key, path.replace(tag, changed)))).toBe(true)
      expect(Option.isNone(readReturnPath(key, path.replace(`+${id}.`, `+${id + 1}.`)))).toBe(true)
      expect(Option.isNone(readReturnPath(key, path.replace(`.${index}.`, `.${index + 1}.`)))).toBe(true)
    }))
  })

  it("refuses another key, another domain, and what is not the shape", () => {
    const path = returnPath(key, 7, 0)
    expect(Option.isNone(readReturnPath({ ...key, secret: new Uint8Array(32) }, path))).toBe(true)
    expect(Option.isNone(readReturnPath({ ...key, domain: "other.example" }, path))).toBe(true)
    for (const bad of ["", "bounces@inbox.localhost", "bounces+7.0@inbox.localhost", "bounces+7.0.abc@inbox.localhost", "bounces+-7.0.0123456789@inbox.localhost", "bounces+7.0.0123456789@", `${path}@x`]) {
      expect(Option.isNone(readReturnPath(key, bad)), bad).toBe(true)
    }
    fc.assert(fc.property(fc.string(), (s) => {
      expect(() => readReturnPath(key, s)).not.toThrow()
    }))
  })
})
