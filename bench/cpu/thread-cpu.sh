#!/bin/bash
# CPU per thread of the running service (and of the PostgreSQL server's processes) over a window
# of a benchmark's load, from /proc: which thread pays how much per message. Start it beside a
# bench run; it waits for the service, lets the warm-up pass, then reads two snapshots.
#
#   bench/cpu/thread-cpu.sh [SECONDS_BEFORE=8] [WINDOW=5] & \
#     BENCH_SCALE=2 BENCH_PEERS=0 BENCH_ENGINES=postgres BENCH_CASES=reuse BENCH_ACCOUNTS=1 npm run bench -- mx
#
# Prints user and system ticks (10 ms each) per thread over the window: MainThread is the event
# loop, WorkerThread the prepare thread (and on PGlite its database thread), V8Worker V8's helpers
# (GC); "pg" rows are the server's backends and background processes. Divide by the window and the
# run's msgs/s for ms per message. bench/REPORT.md (MX ingest, eleventh session) has an example.
before=${1:-8}
window=${2:-5}
for _ in $(seq 1 600); do
  pid=$(pgrep -f "dist/src/main.js" | head -1)
  [ -n "$pid" ] && break
  sleep 0.2
done
[ -z "$pid" ] && { echo "no service process found" >&2; exit 1; }
sleep "$before"
snap() {
  for t in /proc/"$pid"/task/*; do
    echo "$(basename "$t") $(tr ' ' _ < "$t"/comm) $(awk '{print $14, $15}' "$t"/stat)"
  done
  for p in $(pgrep -f "postgres: "); do
    echo "pg$p $(tr ' ' _ < /proc/"$p"/comm) $(awk '{print $14, $15}' /proc/"$p"/stat)"
  done
}
a=$(mktemp) && b=$(mktemp)
snap | sort > "$a"
sleep "$window"
snap | sort > "$b"
join "$a" "$b" | awk -v w="$window" '{u = $6 - $3; s = $7 - $4; if (u + s > 0) printf "%-10s %-16s user %5d sys %5d  (%.2f cores)\n", $1, $2, u, s, (u + s) / 100 / w; U += u; S += s}
  END {printf "total      user %d sys %d ticks over %d s (%.2f cores)\n", U, S, w, (U + S) / 100 / w}'
rm -f "$a" "$b"
