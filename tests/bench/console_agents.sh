#!/usr/bin/env bash
# Console figures over real agents: AGENTS ringmaster-agents (32) on
# loopback run a sweep of RANKS ranks each (2), 4 channels a rank, shown in
# the console's main window for SECONDS (60) and recorded; then that
# recording, scaled to 256 agents x 8 ranks, replayed at its own pace.
# Both print the GUI thread's CPU time per 100 ms (docs/performance.md).
#   tests/bench/console_agents.sh BUILD [AGENTS] [RANKS] [SECONDS] [KEEP.jsonl]
set -euo pipefail
build=${1:?usage: console_agents.sh BUILD [AGENTS] [RANKS] [SECONDS] [KEEP.jsonl]}
n=${2:-32}
per=${3:-2}
secs=${4:-60}
keep=${5:-}
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
source "$(dirname "$0")/local_agents.sh"
start_local_agents "$n"
record="$work/run.jsonl"
"$build/tests/bench/console_bench" --agents "$agents" --token-file "$work/token" --np-per-agent "$per" \
  --channels 4 --seconds "$secs" --record "$record"
for p in "${agent_pids[@]}"; do kill "$p" 2>/dev/null || true; done
echo "recorded $(wc -l <"$record") messages ($(du -h "$record" | cut -f1))"
"$build/tests/bench/console_bench" --replay "$record" --scale $((256 / n)) --ranks-per-agent 8 --seconds "$secs"
if [[ -n $keep ]]; then cp "$record" "$keep"; fi
