#!/usr/bin/env bash
# False slow-link alarms: RUNS sweeps (default 20) over two real agents on
# loopback, two ranks each (the console's default), all links healthy;
# counts the runs that named a slow link. That a slow link is still named
# is the slow-link scenario's part (ringmaster-cli repro run slow-link:
# one host limited to 40 Mbit/s in network namespaces).
#   tests/bench/slow_link_alarms.sh [build-dir] [runs]
set -euo pipefail
build=$(realpath "${1:-build/release}")
runs=${2:-20}
source "$(dirname "$0")/local_agents.sh"
start_local_agents 2
alarms=0
for ((run = 1; run <= runs; run++)); do
  "$build/app/ringmaster-cli" remote --agents "$agents" --token-file "$work/token" --np-per-agent 2 \
    perf all_reduce -b 1M -e 16M -f 4 -n 5 -w 2 >"$work/out" 2>&1 || true
  named=$(grep -c '^# Slow link' "$work/out" || true)
  busbw=$(grep -o 'Avg bus bandwidth *: *[0-9.]*' "$work/out" | grep -o '[0-9.]*$' || echo "?")
  echo "run $run: avg busbw $busbw GB/s, slow links named: $named"
  grep '^# Slow link' "$work/out" || true
  ((named > 0)) && alarms=$((alarms + 1))
done
echo "$alarms of $runs runs named a slow link where none was"
