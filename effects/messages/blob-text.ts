/**
 * Text bodies kept in their message's body file (migration 042). A large message's body is a file
 * (effects/ports/MimeBlobs.ts); when its text is a byte range of that body, its row keeps the
 * file's key (`text_blob`) and the range (`text_range`: start, length) instead of a second copy,
 * and `text_body` is ''. Every reader of `text_body` on `inbound_messages` reads through here.
 */
import { Effect } from "effect"
import type { MimeBlobsShape } from "../ports/MimeBlobs.ts"
import { rangedText } from "../shared/ranged-text.ts"

/** The columns a reader selects beside `text_body` for it. */
export const BLOB_TEXT_COLUMNS = "text_blob, text_range"

/** Bytes of a row's text kept in its file (0 when the text is in the row): a page's size of the row adds it. */
export const BLOB_TEXT_BYTES = "coalesce(text_range[2], 0)"

export interface BlobTextRow {
  readonly text_body: string | null
  readonly text_blob: string | null
  readonly text_range: ReadonlyArray<number> | null
}

/** Files read at once for one call (a page of 100 rows reads its light rows' texts). */
const READS_AT_ONCE = 8

/**
 * `rows` in order, each text kept in a file read into `text_body`. A row whose file is gone is
 * left out: its message was deleted after the row was read (the file goes only after its rows).
 * `when` picks the rows to read (the others are kept as they are). Reads and rows without a file
 * cost nothing more: this is on every message read and every page.
 */
export const withBlobTexts = <R extends BlobTextRow>(
  blobs: MimeBlobsShape,
  rows: ReadonlyArray<R>,
  when: (row: R) => boolean = () => true,
): Effect.Effect<ReadonlyArray<R>> => {
  const inFiles = rows.filter((row) => row.text_blob !== null && row.text_range !== null && when(row))
  if (inFiles.length === 0) return Effect.succeed(rows)
  return Effect.map(
    Effect.forEach(inFiles, (row) => blobs.readRange(row.text_blob!, row.text_range![0]!, row.text_range![1]!), { concurrency: READS_AT_ONCE }),
    (texts) => {
      const read = new Map(inFiles.map((row, i) => [row, texts[i]]))
      return rows.flatMap((row) => {
        if (!read.has(row)) return [row]
        const bytes = read.get(row)
        return bytes === undefined ? [] : [{ ...row, text_body: rangedText(bytes) }]
      })
    },
  )
}
