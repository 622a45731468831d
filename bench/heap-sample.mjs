/**
 * Allocation sampling of the service's event loop, keeping the samples of objects that a full GC
 * collected: what was promoted to the old generation and died there, which `--heap-prof` (live
 * objects only, and a GC before it writes) does not show. Loaded ahead of the service:
 *
 *   BENCH_NODE_FLAGS="--import=$PWD/bench/heap-sample.mjs" BENCH_PEERS=0 BENCH_ENGINES=postgres \
 *     BENCH_CASES=reuse BENCH_ACCOUNTS=1 npm run bench -- mx
 *
 * Writes /tmp/heap-sample-PID.heapprofile at exit (open it in Chrome DevTools' Memory tab, or walk
 * `head` and its children's `selfSize`). HEAP_SAMPLE_MINOR=1 (in BENCH_SERVICE_ENV) keeps the
 * objects that died young too: every allocation, sampled. The service re-executes itself with its
 * engine's flags (src/process.ts); the sampler starts again in the new process.
 */
import fs from "node:fs"
import inspector from "node:inspector"
import { isMainThread } from "node:worker_threads"

if (isMainThread) {
  const session = new inspector.Session()
  session.connect()
  session.post("HeapProfiler.enable")
  session.post("HeapProfiler.startSampling", {
    samplingInterval: Number(process.env.HEAP_SAMPLE_INTERVAL ?? 8192),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.HEAP_SAMPLE_MINOR === "1",
  })
  // The inspector answers on this thread, before `exit` returns.
  process.on("exit", () =>
    session.post("HeapProfiler.stopSampling", (error, result) => {
      if (!error) fs.writeFileSync(`/tmp/heap-sample-${process.pid}.heapprofile`, JSON.stringify(result.profile))
    })
  )
}
