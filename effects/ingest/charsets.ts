/**
 * Body charset decoding for mailparser, on the runtime's own WHATWG `TextDecoder` (full ICU:
 * Shift_JIS, EUC-JP, ISO-2022-JP, EUC-KR, GBK/GB18030, Big5, KOI8, ISO-8859-*, windows-125x …).
 *
 * Why: mailparser decodes non-UTF-8 bodies with `libmime.createDecodeStream`, which the libmime
 * pinned by package.json's overrides (5.4.4, STACK-NOTES.md) does not have; mailparser then
 * silently keeps the bytes as UTF-8 and every non-UTF-8 body turns into U+FFFD. mailparser's
 * `Iconv` option takes a node-iconv style constructor instead, which this provides.
 */
import { Transform } from "node:stream"

/** Names mail uses that WHATWG labels spell differently. */
const ALIASES: Record<string, string> = {
  cp949: "euc-kr",
  "ks_c_5601-1987": "euc-kr",
  sjis: "shift_jis",
  "x-sjis": "shift_jis",
  "windows-31j": "shift_jis",
  cp932: "shift_jis",
  "x-euc-jp": "euc-jp",
  "iso-2022-jp-2": "iso-2022-jp",
  utf8: "utf-8",
}

/** `new CharsetDecoder(charset)` → a stream of UTF-8 bytes; throws for unknown charsets (mailparser then leaves the part as is). */
export function CharsetDecoder(this: unknown, charset: string): Transform {
  const name = charset.toLowerCase().replace(/\/\/.*$/, "").trim()
  const decoder = new TextDecoder(ALIASES[name] ?? name, { fatal: false })
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      done(null, Buffer.from(decoder.decode(chunk, { stream: true }), "utf8"))
    },
    flush(done) {
      done(null, Buffer.from(decoder.decode(), "utf8"))
    },
  })
}
