/**
 * The SMS text (effects/sms/summary.ts) looks at the start of a long body only; it must say exactly
 * what flattening the whole body would, for any body: whitespace runs and surrogate pairs across
 * the cut, control characters, bodies of any length around the cut.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { clip, SMS_MAX_CHARS, smsSummary } from "../../effects/sms/summary.ts"

/** The definition: the whole body made one line. */
const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim()
const whole = (m: { fromAddr: string; subject: string; textBody: string }) => {
  const body = oneLine(m.textBody)
  return clip(`From ${clip(oneLine(m.fromAddr) || "unknown sender", 50)}: ${clip(oneLine(m.subject) || "(no subject)", 60)}${body ? ` | ${body}` : ""}`, SMS_MAX_CHARS)
}

// Bodies built from pieces that stress the cut: long whitespace runs, emoji, control characters.
const piece = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 30 }),
  fc.constantFrom(" ", "\r\n", "\t\t", " \u00a0\u2028 ", "😀", "\u0000", "x"),
  fc.integer({ min: 1, max: 700 }).map((n) => " ".repeat(n)),
  fc.integer({ min: 1, max: 400 }).map((n) => "😀".repeat(n)),
  fc.integer({ min: 1, max: 700 }).map((n) => "ab ".repeat(n)),
)

describe("the SMS summary", () => {
  it("is what the whole body gives, however long the body and wherever the cut falls", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 80 }),
        fc.string({ maxLength: 80 }),
        fc.array(piece, { maxLength: 40 }).map((ps) => ps.join("")),
        (fromAddr, subject, textBody) => {
          const m = { fromAddr, subject, textBody }
          expect(smsSummary(m)).toBe(whole(m))
        },
      ),
      { numRuns: 2_000 },
    )
  })

  it("cuts a long body at 160 characters with a mark", () => {
    const s = smsSummary({ fromAddr: "asha@example.co.tz", subject: "Invoice 42", textBody: "Habari ".repeat(50_000) })
    expect(Array.from(s)).toHaveLength(SMS_MAX_CHARS)
    expect(s.startsWith("From asha@example.co.tz: Invoice 42 | Habari Habari")).toBe(true)
    expect(s.endsWith("…")).toBe(true)
  })
})
