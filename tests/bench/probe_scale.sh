#!/usr/bin/env bash
# Init of N ranks as threads (`ringmaster-cli probe --np`), for the
# figures of docs/performance.md "Init at scale": the wall time from the
# start to the last READY and the resident memory a rank. Past 2,048 ranks
# one process runs out of descriptors (about five a rank under a limit of
# 20,000 here), so the ranks are split over PROCS processes of N/PROCS
# threads (--first-rank), which share one store and one job. Each run
# leaves thousands of loopback connections in TIME_WAIT for 60 s, and the
# next run's connects slow down among them: set PROBE_SCALE_PAUSE=60 to
# wait that long between runs.
#   tests/bench/probe_scale.sh [build-dir] [ranks] [processes] [runs]
set -euo pipefail
build=${1:-build/release}
n=${2:-1024}
procs=${3:-1}
runs=${4:-3}
cli="$build/app/ringmaster-cli"
if ((n % procs != 0)); then
  echo "probe_scale: $n ranks do not split evenly over $procs processes" >&2
  exit 2
fi
per=$((n / procs))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((run = 0; run < runs; run++)); do
  ((run == 0)) || sleep "${PROBE_SCALE_PAUSE:-0}"
  port=$((20000 + RANDOM % 9000))  # below the ephemeral range
  start=$(date +%s%N)
  pids=()
  for ((p = 0; p < procs; p++)); do
    "$cli" probe --np "$per" --first-rank $((p * per)) --world-size "$n" \
      --master-addr 127.0.0.1 --master-port "$port" --json >"$out/events.$p" &
    pids+=($!)
  done
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  end=$(date +%s%N)
  rss_kib=0 probe_ms=0
  # Each process's summary line says its peak resident memory and its
  # ranks' time from their start to the last READY (probe's own clock).
  for ((p = 0; p < procs; p++)); do
    rss_kib=$((rss_kib + $(sed -n 's/.*"max_rss_kib":\([0-9]*\).*/\1/p' "$out/events.$p")))
    ms=$(sed -n 's/.*"wall_ms":\([0-9]*\).*/\1/p' "$out/events.$p")
    ((ms > probe_ms)) && probe_ms=$ms
  done
  ready=$(cat "$out"/events.* | grep -c '"READY"' || true)
  awk -v run="$run" -v n="$n" -v procs="$procs" -v ms=$(((end - start) / 1000000)) -v probe_ms="$probe_ms" \
    -v ready="$ready" -v kib="$rss_kib" -v failed="$failed" 'BEGIN {
      printf "run %d: %d ranks in %d process(es): %d ms in probe (%d ms with the processes), %d READY, " \
        "%.1f MB resident (%.1f KB a rank)%s\n", run, n, procs, probe_ms, ms, ready, kib / 1024, kib * 1.024 / n,
        failed ? ", FAILED" : "" }'
done
