/**
 * The text a byte range of a message stands for (effects/ingest/mime-quick.ts `textRange`): its
 * bytes as UTF-8 with every CR LF made LF. What migration 039 makes of a range in the database,
 * and what every reader in JavaScript makes of one: a text in a body's file
 * (effects/messages/blob-text.ts), a short one the preparer puts in its row, the start an SMS
 * summary reads (effects/sms/summary.ts).
 */
export const rangedText = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8").replaceAll("\r\n", "\n")
