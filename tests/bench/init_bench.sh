#!/usr/bin/env bash
# Wall time to initialise N ranks as N real processes on loopback (default
# 16), each driven by torchrun's environment, from the first start to the
# last READY. Prints the median of several runs.
#   tests/bench/init_bench.sh [build-dir] [ranks] [runs]
set -euo pipefail
build=${1:-build/release}
n=${2:-16}
runs=${3:-5}
cli="$build/app/ringmaster-cli"
times=()
for ((run = 0; run < runs; run++)); do
  port=$((20000 + RANDOM % 9000))  # below the ephemeral range
  start=$(date +%s%N)
  pids=()
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$cli" probe --json >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s%N)
  times+=($(((end - start) / 1000000)))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
echo "init of $n ranks (processes on loopback), ms per run: $sorted"
echo "median: $median ms"
