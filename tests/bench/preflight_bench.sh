#!/usr/bin/env bash
# Wall time of `ringmaster-cli preflight` over N real agents on loopback
# (default 64): every agent listens on its sample ports, probes every other
# agent's, and answers with its facts. Prints each run's time, the probes
# made and the median.
#   tests/bench/preflight_bench.sh [build-dir] [agents] [runs]
set -euo pipefail
build=$(realpath "${1:-build/release}")
n=${2:-64}
runs=${3:-3}
source "$(dirname "$0")/local_agents.sh"
start_local_agents "$n"
times=()
for ((run = 0; run < runs; run++)); do
  port=$((20000 + RANDOM % 9000))
  start=$(date +%s%N)
  rc=0
  "$build/app/ringmaster-cli" preflight --agents "$agents" --token-file "$work/token" --master-port "$port" \
    --json-file "$work/report.json" >"$work/out" || rc=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  times+=("$ms")
  summary=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
bad = sum(1 for p in r["probes"] if p["reach"] != "ok")
problems = [f["text"] for f in r["findings"] if f["severity"] == "problem"]
probes = len(r["probes"])
print(f"{probes} probes, {bad} not ok, {len(problems)} problem(s)" + (": " + problems[0] if problems else ""))
' "$work/report.json")
  echo "run $run: $ms ms (exit $rc): $summary"
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
echo "preflight over $n agents (processes on loopback), median: $median ms"
