#!/bin/bash
# Interleaved A/B runs of one MX case: two checkouts (say the session's start and its head, as git
# worktrees sharing one node_modules), alternated round by round, so a host that speeds up or
# slows down mid-way weighs on both alike. Odd rounds run A first, even rounds B first: the second
# run of a pair came out ~5 % faster whichever code it ran (bench/REPORT.md, MX ingest,
# twenty-third session), so use an even number of rounds. On a noisy machine single runs differ
# by up to 40 % in CPU per message (bench/REPORT.md, MX ingest, 2026-11-27 fourth session);
# compare medians of pairs, never two single runs.
#
#   bench/ab.sh DIR_A DIR_B ENGINE CASE ROUNDS [ENV_A_JSON] [ENV_B_JSON]
#   git worktree add -f /tmp/base 7d32a05 && ln -s "$PWD/node_modules" /tmp/base/node_modules
#   bench/ab.sh /tmp/base . postgres large 4
#   bench/ab.sh . . pglite reuse 3 '{}' '{"INGEST_THREADS":"0"}'
#   AB_FLAGS_B=--single-threaded-gc bench/ab.sh . . postgres reuse 8   # node flags per side (BENCH_NODE_FLAGS)
#
# ENGINE: pglite | postgres; CASE: reuse | once | large (bench/mx.ts); one account (AB_ACCOUNTS=20: twenty), no peers.
# Prints one line per run, then the medians per side; each run's whole output is kept in $AB_LOGS
# (default /tmp/ab-logs).
set -u
dirA=$1 dirB=$2 engine=$3 case=$4 rounds=$5 envA=${6:-'{}'} envB=${7:-'{}'}
logs=${AB_LOGS:-/tmp/ab-logs}
mkdir -p "$logs"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for side in $order; do
    if [ "$side" = A ]; then dir=$dirA env=$envA flags=${AB_FLAGS_A:-}; else dir=$dirB env=$envB flags=${AB_FLAGS_B:-}; fi
    log="$logs/$engine-$case-$side-$r-$(date +%s).log"
    (cd "$dir" && BENCH_SERVICE_ENV="$env" BENCH_NODE_FLAGS="$flags" BENCH_PEERS=0 BENCH_ENGINES="$engine" BENCH_CASES="$case" BENCH_ACCOUNTS="${AB_ACCOUNTS:-1}" \
      timeout 600 npm run bench -- mx >"$log" 2>&1)
    result=$(grep '^{"load' "$log")
    if [ -n "$result" ]; then
      echo "$side $r ${result##*account\",\"}"
      echo "$side $result" >>"$logs/summary.$$"
    else
      echo "$side $r FAILED (see $log)"
    fi
    # A run that failed half-way may leave its service behind, holding the ports.
    for p in $(pgrep -f "node.*src/main\.[tj]s"); do kill -TERM "$p"; done
    sleep 1
  done
done
# Medians per side: msgs/s and CPU per message (the service's, and PostgreSQL's where measured).
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "-" }'; }
field() { grep "^$1 " "$logs/summary.$$" 2>/dev/null | grep -o "\"$2\":[0-9.]*" | cut -d: -f2 | median; }
for side in A B; do
  echo "$side medians: msgsPerSecond $(field $side msgsPerSecond), cpuMsPerMessage $(field $side cpuMsPerMessage), dbCpuMsPerMessage $(field $side dbCpuMsPerMessage)"
done
rm -f "$logs/summary.$$"
