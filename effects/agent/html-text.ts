/**
 * Readable text for an HTML-only message, for the model's prompt: html-to-text does the
 * formatting (blocks, lists, tables, entities). Mail HTML comes from anyone, so the work must
 * stay linear in the input, and html-to-text alone is not: its parser (htmlparser2) keeps the
 * open elements with `Array.unshift`, so 100k nested tags take seconds and 400k over a minute.
 * A first pass with htmlparser2's own tokenizer (linear) therefore reduces the HTML to a
 * skeleton: tag names without attributes, text, no script/style/comments, and at most
 * MAX_DEPTH open elements; html-to-text then reads the skeleton.
 */
import { convert, type HtmlToTextOptions } from "html-to-text"
import { Tokenizer } from "htmlparser2"

/** HTML characters looked at; the prompt takes a few thousand characters of text anyway. */
export const MAX_HTML_CHARS = 4_000_000
/**
 * Skeleton characters handed to html-to-text, whose cost per element is high (~10 µs): enough
 * for far more text than the prompt takes, little enough to convert in about 0.1 s at worst.
 */
export const MAX_SKELETON_CHARS = 100_000
/** Open elements kept; deeper opening tags become a space (their text stays). */
export const MAX_DEPTH = 128

const VOID = new Set(["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"])
/** Elements whose content is not text a reader sees. */
// (Not `head`: broken mail often leaves it open, and browsers show the body all the same.)
const HIDDEN = new Set(["script", "style", "title", "template"])
const TAG_NAME = /^[a-z][a-z0-9-]{0,31}$/
/**
 * Left out of the skeleton: html-to-text reads only `<body>` when there is one, and mail often
 * carries text after `</html>` (list footers) that a reader of the message sees.
 */
const DOCUMENT = new Set(["html", "head", "body"])

/** The skeleton of `html`: see the header. Linear in the input. */
export const htmlSkeleton = (html: string): string => {
  const input = html.length > MAX_HTML_CHARS ? html.slice(0, MAX_HTML_CHARS) : html
  const out: Array<string> = []
  let length = 0
  const emit = (piece: string) => {
    out.push(piece)
    length += piece.length
    // Enough: stop reading (the rest of the input is never looked at).
    if (length >= MAX_SKELETON_CHARS) tokenizer.pause()
  }
  const open: Array<string> = []
  // Opening tags dropped past MAX_DEPTH, per name, so their closing tags are dropped too.
  const dropped = new Map<string, number>()
  let hidden = 0
  let name = ""
  const openTag = () => {
    if (!TAG_NAME.test(name) || DOCUMENT.has(name)) return emit(" ")
    if (VOID.has(name)) return emit(`<${name}>`)
    if (open.length >= MAX_DEPTH) {
      dropped.set(name, (dropped.get(name) ?? 0) + 1)
      return emit(" ")
    }
    open.push(name)
    // Hidden elements are tracked (their content is dropped) but not handed on.
    if (HIDDEN.has(name)) hidden++
    else emit(`<${name}>`)
  }
  const closeTag = (closing: string) => {
    if (DOCUMENT.has(closing)) return emit(" ")
    const skipped = dropped.get(closing) ?? 0
    if (skipped > 0) {
      dropped.set(closing, skipped - 1)
      return emit(" ")
    }
    // At most MAX_DEPTH entries to search: still linear overall.
    const at = open.lastIndexOf(closing)
    if (at === -1) return emit(" ")
    for (const popped of open.splice(at)) if (HIDDEN.has(popped)) hidden--
    if (!HIDDEN.has(closing)) emit(`</${closing}>`)
  }
  const noop = () => {}
  const tokenizer = new Tokenizer({ xmlMode: false, decodeEntities: false }, {
    ontext: (start, end) => {
      // Raw text keeps its entities for html-to-text to decode; a bare `<` must not start a tag.
      if (hidden === 0) emit(input.slice(start, end).replaceAll("<", "&lt;"))
    },
    onopentagname: (start, end) => {
      name = input.slice(start, end).toLowerCase()
    },
    onopentagend: () => void openTag(),
    onselfclosingtag: () => void openTag(),
    onclosetag: (start, end) => void closeTag(input.slice(start, end).toLowerCase()),
    onattribdata: noop,
    onattribentity: noop,
    onattribend: noop,
    onattribname: noop,
    oncdata: noop,
    oncomment: noop,
    ondeclaration: noop,
    onend: noop,
    onprocessinginstruction: noop,
    ontextentity: noop,
  })
  tokenizer.write(input)
  if (length < MAX_SKELETON_CHARS) tokenizer.end()
  return out.join("").slice(0, MAX_SKELETON_CHARS)
}

const OPTIONS: HtmlToTextOptions = {
  wordwrap: false,
  // The skeleton is already bounded; html-to-text must not truncate (it would write to stderr).
  limits: { maxInputLength: undefined },
  selectors: [
    { selector: "a", options: { ignoreHref: true } },
    { selector: "img", format: "skip" },
    ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({ selector, options: { uppercase: false } })),
    { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false } },
  ],
}

/** Plain text of untrusted HTML. */
export const htmlToText = (html: string): string =>
  // A no-break space reads as a space to the model (and to the old converter's callers).
  convert(htmlSkeleton(html), OPTIONS).replaceAll("\u00a0", " ").trim()
