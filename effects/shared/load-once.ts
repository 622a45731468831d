/**
 * A module loaded the first time it is needed, not when its importer is. mailparser, nodemailer
 * and jose together are ~10 MiB resident (heap, code, their own dependencies) that an idle
 * service, or one that never sends, parses a bounce or signs in with Google, never needs; on
 * PGlite the idle budget is 250 MB (issue 11, bench/REPORT.md). The event loop's preparer loads
 * mailauth and the parsing code the same way (../ingest/preparer.ts).
 *
 * A failed load is not remembered: the next caller tries again.
 */
export const loadOnce = <A>(load: () => Promise<A>): () => Promise<A> => {
  let loading: Promise<A> | undefined
  return () =>
    (loading ??= load().catch((e: unknown) => {
      loading = undefined
      throw e
    }))
}
