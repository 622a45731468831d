/**
 * The SMS text (effects/sms/summary.ts) looks at the start of a long body only; it must say exactly
 * what flattening the whole body would, for any body: whitespace runs and surrogate pairs across
 * the cut, control characters, bodies of any length around the cut.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { clip, SMS_MAX_CHARS, smsBodyOf, smsBodyOfBytes, smsSummary } from "../../effects/sms/summary.ts"

/** The definition: the whole body made one line. */
const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim()
const whole = (m: { fromAddr: string; subject: string; smsBody: string }) => {
  const body = oneLine(m.smsBody)
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
  it("is what the whole body gives, however long the body and wherever the cut falls; the same from smsBodyOf's part of it", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 80 }),
        fc.string({ maxLength: 80 }),
        fc.array(piece, { maxLength: 40 }).map((ps) => ps.join("")),
        (fromAddr, subject, textBody) => {
          const m = { fromAddr, subject, smsBody: textBody }
          expect(smsSummary(m)).toBe(whole(m))
          // What ingest carries to the commit instead of the body.
          expect(smsSummary({ ...m, smsBody: smsBodyOf(textBody) })).toBe(whole(m))
        },
      ),
      { numRuns: 2_000 },
    )
  })

  it("gives the same summary from a text's bytes, reading only their start where it decides", () => {
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 40 }).map((ps) => ps.join("").replaceAll("\u0000", "")),
        (body) => {
          // What ingest has: the body as UTF-8 (no NUL); its text is those bytes with CR LF made LF.
          const bytes = Buffer.from(body, "utf8")
          const text = bytes.toString("utf8").replaceAll("\r\n", "\n")
          const m = { fromAddr: "a@b.example", subject: "s" }
          expect(smsSummary({ ...m, smsBody: smsBodyOfBytes(bytes) })).toBe(whole({ ...m, smsBody: text }))
        },
      ),
      { numRuns: 2_000 },
    )
    // A long body is read no further than its start, and carried as its first 640 units.
    const long = Buffer.from("Habari\r\n😀 ".repeat(20_000))
    expect(smsBodyOfBytes(long)).toBe(long.subarray(0, 3_000).toString().replaceAll("\r\n", "\n").slice(0, 4 * SMS_MAX_CHARS))
    // One that starts with a long run of blanks is read whole.
    const blanks = Buffer.from(" ".repeat(5_000) + "Habari\r\n")
    expect(smsBodyOfBytes(blanks)).toBe(" ".repeat(5_000) + "Habari\n")
  })

  it("carries only the start of a long body to the commit, the whole of one the start does not decide", () => {
    const long = "Habari ".repeat(50_000)
    expect(smsBodyOf(long)).toBe(long.slice(0, 4 * SMS_MAX_CHARS))
    // A long run of blanks makes the start one short line: the rest of the body decides.
    const blanks = " ".repeat(5_000) + "Habari"
    expect(smsBodyOf(blanks)).toBe(blanks)
    expect(smsBodyOf("short")).toBe("short")
    // A body of up to 4,096 code units (most mail) is carried whole, without looking.
    const brief = "Habari ".repeat(585)
    expect(smsBodyOf(brief)).toBe(brief)
    expect(smsBodyOf(brief + "Habari ")).toBe(brief.slice(0, 4 * SMS_MAX_CHARS))
    // A surrogate pair across the cut is carried as the code units it was cut into.
    const emoji = "😀".repeat(3_000)
    expect(smsBodyOf(emoji)).toBe(emoji.slice(0, 4 * SMS_MAX_CHARS))
  })

  it("cuts a long body at 160 characters with a mark", () => {
    const s = smsSummary({ fromAddr: "asha@example.co.tz", subject: "Invoice 42", smsBody: "Habari ".repeat(50_000) })
    expect(Array.from(s)).toHaveLength(SMS_MAX_CHARS)
    expect(s.startsWith("From asha@example.co.tz: Invoice 42 | Habari Habari")).toBe(true)
    expect(s.endsWith("…")).toBe(true)
  })
})
