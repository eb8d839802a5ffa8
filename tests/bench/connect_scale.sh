#!/usr/bin/env bash
# Init of N ranks as processes on loopback with every data connection a
# communicator makes (`ringmaster-cli perf all_reduce --np N` forks them;
# one 8-byte call), for docs/performance.md "Direct connections on first
# use". Per run: the slowest rank's init (its "Init timings" total), the
# wall time, the peak resident memory of the largest rank's process, and
# the direct connections made (the INFO
# line "p2p : a -> b via ..." that the opening rank of each writes). Give
# two builds to run them in turns, the first one first.
#   tests/bench/connect_scale.sh ranks runs build-dir [build-dir]
set -euo pipefail
n=${1:-32}
runs=${2:-3}
shift 2
builds=("$@")
((${#builds[@]} > 0)) || builds=(build/release)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((run = 0; run < runs; run++)); do
  for build in "${builds[@]}"; do
    NCCL_DEBUG=INFO /usr/bin/time -f "%e %M" -o "$log.time" \
      "$build/app/ringmaster-cli" perf all_reduce --np "$n" -b 8 -e 8 -n 1 -w 0 >"$log" 2>&1
    init=$(grep -o 'Init timings - total [0-9.]* ms' "$log" | awk '{print $5}' | sort -n | tail -1)
    read -r wall rss <"$log.time"
    echo "$build: $n ranks, slowest init ${init} ms, wall ${wall} s, peak ${rss} KB," \
      "$(grep -c 'INIT p2p : .* -> .* via' "$log") direct connections"
    rm -f "$log.time"
  done
done
