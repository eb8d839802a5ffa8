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
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
for ((i = 0; i < n; i++)); do
  "$build/app/ringmaster-agent" --listen 127.0.0.1:0 --print-port --token-file "$work/token" \
    --state-dir "$work/state$i" --rank-user "$(id -un)" --log-level warn >"$work/port$i" 2>"$work/log$i" &
  pids+=($!)
done
agents=""
for ((i = 0; i < n; i++)); do
  for ((t = 0; t < 100; t++)); do
    [[ -s "$work/port$i" ]] && break
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "agent $i did not start:" >&2
      cat "$work/log$i" >&2
      exit 1
    fi
    sleep 0.1
  done
  agents+="${agents:+,}127.0.0.1:$(head -1 "$work/port$i")"
done
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
