#!/usr/bin/env bash
# Wall time of `ringmaster-cli certify` over N real agents on loopback
# (default 64): nodes alike, preflight, the link check of N x (N-1) links
# in rounds of disjoint pairs, and an all_reduce sweep over every node.
# Prints each run's time and each step's, and the link check alone over the
# same agents in the same run as the peer it is mostly made of.
#   tests/bench/certify_bench.sh [build-dir] [agents] [runs]
set -euo pipefail
build=$(realpath "${1:-build/release}")
n=${2:-64}
runs=${3:-1}
source "$(dirname "$0")/local_agents.sh"
start_local_agents "$n"
echo "$n agents (processes on loopback) on $(nproc) CPU(s)"
for ((run = 0; run < runs; run++)); do
  start=$(date +%s%N)
  rc=0
  "$build/app/ringmaster-cli" certify --agents "$agents" --token-file "$work/token" --env NCCL_SHM_DISABLE=1 \
    --collectives all_reduce --min-bytes 64K --max-bytes 1M --link-bytes 1M --link-iters 2 --history off \
    --json-file "$work/report.json" >"$work/out" 2>"$work/err" || rc=$?
  end=$(date +%s%N)
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
steps = ", ".join("%s %.1f s (%s)" % (s["name"], s["seconds"], s["state"]) for s in r["steps"])
verdicts = {}
for node in r["nodes"]:
    verdicts[node["verdict"]] = verdicts.get(node["verdict"], 0) + 1
print(f"certify run {sys.argv[2]}: {int(sys.argv[3]) / 1000:.1f} s wall (exit {sys.argv[4]}): {steps}; nodes {verdicts}")
for s in r["steps"]:
    for f in s.get("findings", [])[:6]:
        print("  %s: %s" % (s["name"], f))
links = {}
for link in r.get("links", []):
    links[link["verdict"]] = links.get(link["verdict"], 0) + 1
print("  links found wanting: %s" % (links or "none"))
for link in r.get("links", []):
    if link["verdict"] == "ISOLATE":
        print("  link %d -> %d: ISOLATE: %s" % (link["from"], link["to"], "; ".join(x["text"] for x in link["reasons"])))
for node in r["nodes"]:
    if node["verdict"] != "PASS":
        why = node["reasons"][0]["text"] if node["reasons"] else ""
        print("  node %s: %s: %s" % (node["address"], node["verdict"], why))
' "$work/report.json" "$run" "$(((end - start) / 1000000))" "$rc"
  start=$(date +%s%N)
  "$build/app/ringmaster-cli" linkcheck --agents "$agents" --token-file "$work/token" --env NCCL_SHM_DISABLE=1 \
    --bytes 1M --iters 2 >/dev/null 2>&1 || true
  end=$(date +%s%N)
  echo "peer: linkcheck alone over the same agents: $(((end - start) / 1000000)) ms"
done
