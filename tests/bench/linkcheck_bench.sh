#!/usr/bin/env bash
# Wall time of `ringmaster-cli linkcheck` over N real agents on loopback
# (default 8): every pair of nodes measured both ways by a two-rank
# sendrecv run, in rounds of disjoint pairs. Prints each run's time and its
# links' median, and in the same run iperf3's single-stream rate on
# loopback as the peer for what one link can carry here.
#   tests/bench/linkcheck_bench.sh [build-dir] [agents] [runs]
set -euo pipefail
build=$(realpath "${1:-build/release}")
n=${2:-8}
runs=${3:-3}
source "$(dirname "$0")/local_agents.sh"
start_local_agents "$n"
times=()
for ((run = 0; run < runs; run++)); do
  start=$(date +%s%N)
  rc=0
  "$build/app/ringmaster-cli" linkcheck --agents "$agents" --token-file "$work/token" --env NCCL_SHM_DISABLE=1 \
    --json-file "$work/report.json" >"$work/out" || rc=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  times+=("$ms")
  summary=$(python3 -c '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
rates = [l["gbs"] * 1000 for l in r["links"] if l["gbs"] > 0]
links, rounds, findings = len(r["links"]), r["rounds"], len(r["findings"])
mid, low, high = statistics.median(rates), min(rates), max(rates)
print(f"{len(rates)} of {links} links measured in {rounds} rounds, median {mid:.0f} MB/s (min {low:.0f}, max {high:.0f}), {findings} finding(s)")
for f in r["findings"]: print("  finding:", f)
' "$work/report.json")
  echo "run $run: $ms ms (exit $rc): $summary"
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
echo "linkcheck over $n agents (processes on loopback), median: $median ms"
if command -v iperf3 >/dev/null; then
  port=$((20000 + RANDOM % 9000))
  iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -t 3 -J 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
rate = r["end"]["sum_received"]["bits_per_second"] / 8e6
print(f"peer: iperf3, one stream on loopback, {rate:.0f} MB/s")'
fi
