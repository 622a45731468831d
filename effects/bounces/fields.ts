/**
 * The machine-readable parts of reports: `message/delivery-status` (RFC 3464) and
 * `message/feedback-report` (RFC 5965) are blocks of header-style fields, folded like mail
 * headers, the DSN's blocks separated by blank lines (per-message fields, then one block per
 * recipient).
 */

/** Lowercase field name → unfolded value (the first occurrence wins). */
export type FieldBlock = ReadonlyMap<string, string>

/** Splits `text` into blocks of fields; lines that are not fields are skipped. */
export const fieldBlocks = (text: string): Array<FieldBlock> => {
  const blocks: Array<Map<string, string>> = []
  let current: Map<string, string> | undefined
  let last: string | undefined
  for (const line of text.replace(/\r\n?/g, "\n").split("\n")) {
    if (line.trim() === "") {
      current = undefined
      last = undefined
      continue
    }
    if (/^[ \t]/.test(line) && current && last) {
      current.set(last, `${current.get(last)} ${line.trim()}`)
      continue
    }
    const m = /^([A-Za-z0-9-]+)[ \t]*:[ \t]*(.*)$/.exec(line)
    if (!m) continue
    if (!current) blocks.push((current = new Map()))
    last = m[1]!.toLowerCase()
    if (!current.has(last)) current.set(last, m[2]!.trim())
    else last = undefined
  }
  return blocks
}

/** `rfc822; <Asha@Example.co.tz>` → `Asha@Example.co.tz` (address-type prefix and brackets dropped). */
export const addressOf = (value: string | undefined): string | null => {
  if (!value) return null
  const bare = value.replace(/^[^;]*;/, "").trim().replace(/^<(.*)>$/, "$1").trim()
  return bare === "" ? null : bare
}

/** `smtp; 550 5.1.1 …` → `550 5.1.1 …` (the diagnostic-type prefix dropped). */
export const diagnosticOf = (value: string | undefined): string | null => {
  if (!value) return null
  const text = value.replace(/^\s*[A-Za-z][A-Za-z0-9-]*\s*;\s*/, "").replace(/\s+/g, " ").trim()
  return text === "" ? null : text
}
