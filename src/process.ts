/**
 * The process around the service (src/main.ts), before any of it loads:
 *
 * - A lean heap. On Node the entry re-executes itself once (process.execve: same pid, same
 *   stdio) with V8 flags for the engine (`engineFlags`: the young generation, and on PGlite no
 *   WebAssembly tier-up), glibc held to two malloc arenas with fixed thresholds (`mallocTuning`):
 *   ~140 MB less resident memory at idle on PGlite, no ~800 MiB peak (bench/REPORT.md), and large
 *   buffers reused instead of mapped and unmapped per message.
 *   SERVICE_LEAN=0 turns it off; flags and variables already given are kept.
 * - WEB_CONCURRENCY=N on PostgreSQL: N worker processes (node:cluster) sharing the HTTP and SMTP
 *   ports; background work already coordinates through the database (SKIP LOCKED, advisory
 *   locks, AuthChanges). PGlite is one process by nature and Deno has no cluster: both run one
 *   process and say so in the log.
 */
import cluster from "node:cluster"
import { isDeno } from "./is-deno.ts"

const log = (level: "INFO" | "WARN" | "ERROR", message: string, annotations: Record<string, unknown> = {}) =>
  process.stdout.write(JSON.stringify({ message, level, timestamp: new Date().toISOString(), annotations }) + "\n")

/**
 * PGlite's WebAssembly on V8's baseline compiler only (see `engineFlags`). The test processes
 * run with these too (vitest.config.ts): every test file's process compiled PGlite's module
 * again, and tiering it up was a quarter of the CPU of a PGlite test (`perf`, 2026-11-28).
 *
 * `--no-wasm-inlining`: with no optimising tier, nothing is ever inlined, yet the baseline code
 * still gathered call feedback for it: each call of a PGlite function went through a frame-setup
 * builtin (`Builtins_WasmLiftoffFrameSetup`, 5.6 % of PGlite's thread under inbound mail, `perf`).
 * Without it the MX's batch call is 7–14 % faster (bench/ingest-call.ts, alternated runs:
 * 3 messages 1.94–2.11 → 1.70–1.80 ms, 30 messages 7.9–8.2 → 7.0–7.1; bench/REPORT.md, MX ingest,
 * thirtieth session). Given only while the optimising tier is off (`flagsToAdd`).
 */
export const WASM_BASELINE_ONLY = ["--no-wasm-tier-up", "--no-wasm-dynamic-tiering", "--no-wasm-inlining"]

/** Flags that turn the optimising tier on; with either, its inlining is left as V8 has it. */
const OPTIMISING_TIER = new Set(["wasm-tier-up", "wasm-dynamic-tiering"])

/**
 * V8 flags by engine (bench/REPORT.md has the measurements).
 *
 * The young generation:
 * - Embedded PGlite (the default, judged by its idle RSS): 4 MB semi-spaces, idle RSS 221 MiB
 *   against 246 MiB with V8's 16 MB (and 216 with 1 MB, which cost ~50 % more CPU per request).
 * - A PostgreSQL server: 8 MB. At ~8k requests/s with 50 in flight, a 4 MB young generation is
 *   only about twice what the requests in flight hold, so a scavenge every ~6 ms found ~45 % of it
 *   alive and promoted half of that: ~100 MB/s into the old generation and a major GC every ~2 s,
 *   whose pauses made the p99 (~30 ms against ~21 with 32 MB, medians of rounds). 8 MB against
 *   32 MB, measured side by side (2026-11-26): message by id p99 per round 26–39 against 14–61 ms,
 *   ~8 % fewer requests/s (still ~1.5× the peer), idle RSS 153 against 193 MiB, and peak RSS
 *   under 100 KiB inbound mail ~290 against ~340 MiB (the MX's 300 MB target).
 *   It starts at that size (`--min-semi-space-size`) instead of growing to it from 1 MB as the
 *   allocation rate asks: inbound mail over 20 reused connections, measured as the bench measures
 *   it (a warm-up, then ~1 s of load), +5.5 % and +7.4 % (ten interleaved pairs of twelve faster)
 *   at ~9 % less CPU a message, one message per connection and 100 KiB mail level (peak RSS
 *   level under 100 KiB mail, +15–20 MiB under small mail; bench/REPORT.md, MX ingest,
 *   forty-second session).
 *
 * PGlite's WebAssembly stays on V8's baseline compiler (no tier-up to the optimising one). One
 * function of PGlite's module (#2272, 105 KB of code) took the optimising compiler 456 ms and
 * ~600 MB of compiler memory (`--trace-wasm-compilation-times`) within the first few hundred
 * queries: every process on PGlite peaked at ~750–840 MiB RSS, then fell back to ~230. Without
 * tier-up: peak ~300–500 MiB, idle 213–215 MiB; inbound mail on PGlite ~5–10 % slower and the
 * HTTP API on PGlite 15–20 % slower (message by id 0.76–0.85× the peer instead of 0.92–0.96×).
 * A host with memory to spare starts `node --wasm-tier-up src/main.ts` (a flag given wins).
 *
 * On PGlite the old generation grows by at most 1.5× what the last full GC left (V8 allows up to
 * 4× on a host with gigabytes to spare). Three isolates share the process there (the event loop,
 * PGlite's thread, the prepare thread) and under 100 KiB mail each let its large objects pile up
 * to 4× before a full GC: peak RSS 477–506 MiB, 365–377 with 2× (2026-11-26, four interleaved
 * pairs). Since a message's text and socket buffers no longer outlive two scavenges (2026-11-27,
 * sixth session), full GCs are rare enough that 1.5× costs little: 100 KiB mail peaked at
 * 294–307 MiB against 333–355 with 2×, at the same rates; 2 KiB mail 12–24 MiB lower, over reused
 * sessions 967–1,126 against 1,082–1,133 msgs/s, one per connection the same (bench/REPORT.md,
 * MX ingest). The GC's extra work lands on the other threads' idle time, as PGlite's thread is
 * the bound. On a PostgreSQL server the event loop is the bound and 2× cost 100 KiB mail ~20 % of
 * its rate without lowering its peak, so it is PGlite's only.
 */
export const engineFlags = (databaseUrl = process.env.DATABASE_URL): Array<string> =>
  databaseUrl
    ? ["--max-semi-space-size=8", "--min-semi-space-size=8"]
    : ["--max-semi-space-size=4", ...WASM_BASELINE_ONLY, "--heap-growing-percent=50"]

/** A V8 flag's name without `--`, `--no-` or a value: `--no-wasm-tier-up` and `--wasm-tier-up` are one flag. */
export const flagName = (flag: string): string => flag.replace(/^--(no-)?/, "").split("=")[0]!.replaceAll("_", "-")

/** The flags this process was started with: its own and NODE_OPTIONS'. */
export const givenFlags = (): Array<string> => [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)]

/** The engine's flags that `given` (the process's own flags and NODE_OPTIONS) does not already set, either way. */
export const flagsToAdd = (given: ReadonlyArray<string>, databaseUrl = process.env.DATABASE_URL): Array<string> => {
  const flags = given.filter((g) => g.startsWith("--"))
  const named = new Set(flags.map(flagName))
  // V8 takes a boolean flag only as `--flag` or `--no-flag`.
  const optimising = flags.some((g) => !g.startsWith("--no-") && OPTIMISING_TIER.has(flagName(g)))
  // The young generation's size is one choice: an operator who sized it keeps it whole.
  if (named.has("max-semi-space-size")) named.add("min-semi-space-size")
  return engineFlags(databaseUrl).filter((f) => !named.has(flagName(f)) && !(optimising && flagName(f) === "wasm-inlining"))
}

/**
 * glibc's malloc, fixed instead of adaptive (a setting already given wins). A message's buffers
 * (its bytes, parsed parts and row, the batch's parameters and their copies on the way to the
 * database: 0.1 to 16 MiB each, on three threads) come from and go back to malloc's heap up to
 * 4 MiB. They used to be mmap'd and unmapped one by one above 64 KiB (a threshold chosen for idle
 * RSS): each cost its pages' first-touch faults and an munmap whose TLB shootdown reaches every
 * thread of the process, a third of the service's CPU time spent in the kernel under 100 KiB
 * mail. Interleaved on one machine (2026-11-26, bench/REPORT.md), 100 KiB mail over 20 sessions:
 * PostgreSQL 136–137 → 280–334 msgs/s (7.5 → 3.0–3.4 ms CPU per message), PGlite 122 → 210–227;
 * 2 KiB mail within the machine's spread. A 32 MiB threshold gained no more and kept ~13 MiB more
 * at idle on PGlite (249–252 MiB against 234–238; 228–239 as it was); the 256 MiB trim
 * threshold keeps freed memory for the next batch (8 MiB lost a quarter of the gain).
 */
export const mallocTuning = (env: NodeJS.ProcessEnv): Record<string, string> => ({
  MALLOC_MMAP_THRESHOLD_: env.MALLOC_MMAP_THRESHOLD_ ?? String(4 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: env.MALLOC_TRIM_THRESHOLD_ ?? String(256 * 1024 * 1024),
})

/** Replaces the process with a lean one, once; returns when it does not (Deno, opted out, already lean). */
export const becomeLean = (): void => {
  const execve = (process as { execve?: (file: string, args: Array<string>, env: NodeJS.ProcessEnv) => never }).execve
  if (isDeno || !execve || process.env.SERVICE_LEAN === "0" || process.env.SERVICE_LEAN_APPLIED === "1" || cluster.isWorker) return
  const flags = flagsToAdd(givenFlags())
  const env = {
    ...process.env,
    SERVICE_LEAN_APPLIED: "1",
    MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? "2",
    ...mallocTuning(process.env),
  }
  try {
    execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)], env)
  } catch {
    // Not permitted here (sandbox, seccomp): run as we are.
  }
}

/** WEB_CONCURRENCY as a process count; 1 when unset. */
export const processCount = (raw = process.env.WEB_CONCURRENCY): number | "invalid" => {
  if (raw === undefined || raw.trim() === "") return 1
  const n = Number(raw)
  return Number.isInteger(n) && n >= 1 && n <= 64 ? n : "invalid"
}

/**
 * The cluster's primary when WEB_CONCURRENCY > 1 on PostgreSQL: forks the workers and never
 * loads the service itself. Returns false when this process should run the service.
 */
export const runPrimary = (): boolean => {
  if (cluster.isWorker) return false
  const n = processCount()
  if (n === "invalid") {
    console.error("Invalid setting WEB_CONCURRENCY: expected an integer from 1 to 64")
    process.exit(1)
  }
  if (n === 1) return false
  if (!process.env.DATABASE_URL) {
    log("WARN", "WEB_CONCURRENCY ignored: the embedded database (PGlite) serves one process; set DATABASE_URL to run several", { web_concurrency: n })
    return false
  }
  if (isDeno) {
    log("WARN", "WEB_CONCURRENCY ignored: Deno has no node:cluster; running one process", { web_concurrency: n })
    return false
  }

  const ready = new Set<number>()
  let stopping = false
  let exitCode = 0
  const fork = () => {
    const worker = cluster.fork()
    worker.on("message", (m: { type?: string }) => {
      if (m?.type !== "ready") return
      ready.add(worker.id)
      if (ready.size === n) log("INFO", "all workers listening", { workers: n, pids: Object.values(cluster.workers ?? {}).map((w) => w?.process.pid) })
    })
  }
  const alive = () => Object.values(cluster.workers ?? {}).filter((w) => w && !w.isDead())
  const stopAll = (signal: NodeJS.Signals) => {
    for (const w of alive()) w!.process.kill(signal)
    if (alive().length === 0) process.exit(exitCode)
    // The workers' own deadline is 15 s; this one only covers a worker that ignores its signal.
    setTimeout(() => process.exit(1), 20_000).unref()
  }
  cluster.on("exit", (worker, code, signal) => {
    const wasReady = ready.delete(worker.id)
    if (stopping) {
      if (code !== 0 && signal === null) exitCode = 1
      if (alive().length === 0) process.exit(exitCode)
      return
    }
    if (!wasReady) {
      // It never started (bad setting, database unreachable): the others would fail the same way.
      log("ERROR", "a worker failed to start; stopping", { pid: worker.process.pid, code, signal })
      stopping = true
      exitCode = 1
      return stopAll("SIGTERM")
    }
    log("ERROR", "a worker died; starting another", { pid: worker.process.pid, code, signal })
    setTimeout(() => stopping || fork(), 1000).unref()
  })
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    log("INFO", "shutting down", { signal, workers: alive().length })
    stopAll(signal)
  }
  process.on("SIGTERM", () => shutdown("SIGTERM"))
  process.on("SIGINT", () => shutdown("SIGINT"))
  log("INFO", "starting workers", { web_concurrency: n })
  for (let i = 0; i < n; i++) fork()
  return true
}

/** Tells the primary (if any) that this worker listens. */
export const announceReady = (): void => {
  if (cluster.isWorker) process.send?.({ type: "ready" })
}
