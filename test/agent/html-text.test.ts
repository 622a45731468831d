/**
 * The agent's html→text (html-to-text behind a linear skeleton pass): hostile HTML of a few MB
 * converts in a fraction of a second and grows linearly (the regex it replaced took 0.4 s on
 * 140 KB of unclosed `<style>` and minutes on a few MB; html-to-text alone took over a minute on
 * 400k nested tags), and normal mail still gives the same useful text.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { htmlSkeleton, MAX_DEPTH, MAX_SKELETON_CHARS } from "../../effects/agent/html-text.ts"
import { textOf } from "../../effects/agent/prompt.ts"
import { parseMessage } from "../../effects/ingest/parse.ts"

const html = (body: string) => textOf("", body)

/** What the agent used to answer (the regex), as the reference for "the same useful text". */
const previous = (h: string) =>
  h.replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ").replace(/<br\s*\/?>|<\/p>/gi, "\n").replace(/<[^>]+>/g, " ")
    .replace(/&nbsp;/g, " ").replace(/&amp;/g, "&").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/[ \t]+/g, " ").trim()

const words = (s: string) => new Set(s.replace(/^\s*\* /gm, " ").split(/[\s,.;:!?()]+/).filter(Boolean))

const ms = (f: () => unknown): number => {
  const started = performance.now()
  f()
  return performance.now() - started
}
/** The fastest of five runs: garbage collection and a busy shared machine only ever add time. */
const fastest = (f: () => unknown): number => Math.min(...Array.from({ length: 5 }, () => ms(f)))

describe("normal HTML", () => {
  it("gives the readable text: blocks on their own lines, entities decoded, no markup, style or script", () => {
    const text = html(`<html><head><title>Kilimanjaro Lodge</title><style>p { color: red }</style>
      <script>alert("x")</script></head><body><h1>Booking</h1>
      <p>Hello&nbsp;there, is <b>breakfast</b> included?</p><p>Line one<br>line two &amp; three &lt;ok&gt;</p>
      <p>See <a href="https://example.co.tz/book">our page</a> <img src="x.png" alt="logo"></p>
      <ul><li>Room</li><li>Dinner</li></ul></body></html>`)
    expect(text).toBe("Booking\n\nHello there, is breakfast included?\n\nLine one\nline two & three <ok>\n\nSee our page\n\n * Room\n * Dinner")
  })

  it("keeps the plain-text body when there is one", () => {
    expect(textOf("Asante sana", "<p>ignored</p>")).toBe("Asante sana")
  })

  it("says the same as before on the real HTML mail of the corpus", async () => {
    const root = path.join(import.meta.dirname, "../../fixtures/mail/mail-gem")
    const files = fs.readdirSync(root, { recursive: true }).map(String).filter((f) => f.endsWith(".eml"))
    let compared = 0
    for (const file of files) {
      const parsed = await Effect.runPromise(parseMessage(fs.readFileSync(path.join(root, file))))
      if (parsed.html.trim() === "") continue
      compared++
      const before = words(previous(parsed.html))
      if (before.size === 0) continue
      const now = words(html(parsed.html))
      const kept = [...before].filter((w) => now.has(w)).length
      // The words a reader sees survive (the old regex also kept <title> text and raw entities).
      expect(kept / before.size, file).toBeGreaterThan(0.9)
    }
    expect(compared).toBeGreaterThanOrEqual(10)
  })
})

describe("hostile HTML", () => {
  const hostile: Record<string, (n: number) => string> = {
    "unclosed <style>": (n) => "<style>".repeat(Math.ceil(n / 7)),
    "unclosed <script> and </script-like text": (n) => "<script></scrip".repeat(Math.ceil(n / 15)),
    "nested <div>": (n) => "<div>".repeat(Math.ceil(n / 5)) + "deep",
    "self-closed <div/>": (n) => "<div/>".repeat(Math.ceil(n / 6)),
    "nested tables": (n) => "<table><tr><td>".repeat(Math.ceil(n / 15)),
    "paragraphs": (n) => "<p>a</p>".repeat(Math.ceil(n / 8)),
    "bare <": (n) => "<".repeat(n),
    "one huge attribute": (n) => `<a title="${"x".repeat(n)}">t</a>`,
    "comment openers": (n) => "<!--".repeat(Math.ceil(n / 4)),
    "entity soup": (n) => "&amp".repeat(Math.ceil(n / 4)),
  }

  it.each(Object.keys(hostile))("3 MB of %s converts quickly", (shape) => {
    const input = hostile[shape]!(3 * 1024 * 1024)
    let text = ""
    const took = ms(() => (text = html(input)))
    // Measured around 0.1 s; the bound is generous for a busy shared machine.
    expect(took, shape).toBeLessThan(2_000)
    expect(typeof text).toBe("string")
  })

  it.each(Object.keys(hostile))("%s: eight times the input costs about eight times the time, not sixty-four", (shape) => {
    // Large enough to time; the larger one at the input cap (4 MB), beyond which nothing is read.
    // Eight times apart, linear (8) and quadratic (64) stay far apart even when a busy machine or
    // the garbage collector adds half again to one side (a 4x spread put noise too close to 16).
    const small = hostile[shape]!(500_000)
    const large = hostile[shape]!(4_000_000)
    html(small) // warm up the JIT
    // A floor of 5 ms: a few milliseconds of noise on a fast case must not read as growth.
    const ratio = fastest(() => html(large)) / Math.max(fastest(() => html(small)), 5)
    expect(ratio, shape).toBeLessThan(24)
  })

  it("bounds what html-to-text sees: depth and length", () => {
    const deep = htmlSkeleton("<div>".repeat(10_000) + "deep")
    expect(deep.split("<div>").length - 1).toBe(MAX_DEPTH)
    expect(deep).toContain("deep")
    expect(htmlSkeleton("<p>word</p>".repeat(100_000)).length).toBeLessThanOrEqual(MAX_SKELETON_CHARS)
    // Attributes, comments and hidden content never reach it.
    expect(htmlSkeleton(`<a href="x" onclick="y">t</a><!-- c --><style>s</style><script>j</script>`)).toBe("<a>t</a>")
  })
})
