/**
 * Where a received message's time goes inside the service: a recorder of durations by label,
 * for the marks that round.patch (beside this file) adds to the SMTP handlers, the preparer, the
 * writer and the batch call. Not part of the service: the patch is applied for a measurement and
 * reverted after it (it rots as the code moves; fix its hunks by hand when it no longer applies).
 *
 *   git apply bench/round-timing/round.patch
 *   BENCH_NODE_FLAGS="--import $PWD/bench/round-timing/recorder.mjs" \
 *     BENCH_SERVICE_ENV='{"TIMING_FILE":"/tmp/round"}' BENCH_PEERS=0 BENCH_ENGINES=postgres \
 *     BENCH_CASES=reuse BENCH_ACCOUNTS=1 npm run bench -- mx
 *   cat /tmp/round.*      # one file per process: count, mean and percentiles per label, in ms
 *   git apply -R bench/round-timing/round.patch
 *
 * Labels: `a>b` is the time from mark a to mark b of one SMTP session (mail, rcpt, rcptok, data,
 * eod, r250: `r250>mail` is the client's turnaround after our 250); `x.prepare` / `x.submit` the
 * message's prepare and its wait for the commit; `p.*` the hops to and from the prepare thread
 * and its work there; `w.*` the writer's batches (size, queueing, commit, idle between); `c.*` the
 * batch call's parameters and the statement; `r.lookupBatch` RCPT lookups that missed the route
 * cache, per query. The first fifth of each label's samples (the warm-up) is left out.
 * bench/REPORT.md (MX ingest, 2026-11-27 eighth session) has what it showed.
 */
import fs from "node:fs"

const file = process.env.TIMING_FILE
const samples = new Map()
const now = () => performance.now()
globalThis.__tnow = now
globalThis.__tadd = (label, ms) => {
  let list = samples.get(label)
  if (!list) samples.set(label, (list = []))
  list.push(ms)
}
const sessions = new Map()
/** Consecutive marks of one SMTP session: the time from the previous mark is labelled "prev>this". */
globalThis.__tsess = (id, label) => {
  const t = now()
  const last = sessions.get(id)
  if (last) globalThis.__tadd(`${last.label}>${label}`, t - last.t)
  sessions.set(id, { label, t })
}

const dump = () => {
  if (!file) return
  const lines = []
  for (const [label, list] of [...samples.entries()].sort()) {
    if (list.length < 50) continue
    const sorted = list.slice(Math.floor(list.length * 0.2)).sort((a, b) => a - b)
    const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))].toFixed(2)
    const mean = (sorted.reduce((a, b) => a + b, 0) / sorted.length).toFixed(2)
    lines.push(`${label.padEnd(28)} n=${String(list.length).padStart(6)} mean=${mean.padStart(7)} p50=${q(0.5).padStart(7)} p90=${q(0.9).padStart(7)} p99=${q(0.99).padStart(7)}`)
  }
  fs.writeFileSync(`${file}.${process.pid}`, lines.join("\n") + "\n")
}
process.on("exit", dump)
process.on("SIGTERM", dump)
