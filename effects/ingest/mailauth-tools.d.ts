/** The one mailauth internal ingest uses (./verdicts.ts): its header splitter, untyped upstream. */
declare module "mailauth/lib/tools.js" {
  export const parseHeaders: (head: Buffer) => {
    readonly parsed: ReadonlyArray<{ readonly key: string | null; readonly casedKey?: string; readonly line: Buffer }>
    readonly original: Buffer
  }
}
