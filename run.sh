#!/usr/bin/env bash
# Ringmaster's main job: install what is needed, build, then open the
# console with 4 local agents on loopback (free ports), which runs a
# 4-rank all_reduce sweep from 8 B to 64 MiB when you press Run (Ctrl+R).
#
# With no display it says so and runs the same job headless: 4 local
# agents driven by `ringmaster-cli remote`, printing rank 0's init stage
# table and the nccl-tests table. Extra arguments go to the console (or,
# headless, to `ringmaster-cli remote ... perf all_reduce`).
set -euo pipefail
cd "$(dirname "$0")"

scripts/setup-deps
cmake --preset release >/dev/null
# Only the programs this job runs: the tests, benchmarks and the AArch64
# cross build are ./test.sh's.
targets=(ringmaster-agent ringmaster-cli)
if grep -q '^RINGMASTER_UI_ENABLED:INTERNAL=TRUE$' build/release/CMakeCache.txt; then
  targets+=(ringmaster)
fi
cmake --build --preset release --parallel "$(nproc)" --target "${targets[@]}" >/dev/null

bin=build/release/app
if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" && -x "$bin/ringmaster" ]]; then
  exec "$bin/ringmaster" --local 4 "$@"
fi

if [[ ! -x "$bin/ringmaster" ]]; then
  echo "run.sh: the console was not built (Qt 6 missing); running the same job headless." >&2
else
  echo "run.sh: no display (DISPLAY and WAYLAND_DISPLAY are unset); running the same job headless." >&2
  echo "run.sh: for the window, run this on a desktop, or: apt-get install xvfb && xvfb-run ./run.sh" >&2
  echo "run.sh: or save a picture of it: $bin/ringmaster --screenshot ringmaster.png" >&2
fi

# Four local agents on free ports, stopped when this script ends.
pids=()
ports=()
# The agents share a token made for them in a private directory, which
# also holds their state, as the console does for its local agents; they
# run the ranks as this script's user, as a local launch would.
private=$(mktemp -d -t ringmaster-run-XXXXXX)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$private"
}
trap cleanup EXIT
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$private/token")
for i in 1 2 3 4; do
  exec {fd}< <("$bin/ringmaster-agent" --listen 127.0.0.1:0 --print-port --token-file "$private/token" \
    --state-dir "$private/agent-$i" --rank-user "$(id -un)" 2>/dev/null & echo "pid $!"; wait)
  read -r _ pid <&"$fd"
  read -r port <&"$fd"
  pids+=("$pid")
  ports+=("127.0.0.1:$port")
done
agents=$(IFS=,; echo "${ports[*]}")
"$bin/ringmaster-cli" remote --agents "$agents" --token-file "$private/token" --np-per-agent 1 perf all_reduce -b 8 -e 64M -f 2 -n 20 -w 5 "$@"
