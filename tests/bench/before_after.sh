#!/usr/bin/env bash
# One engine against another on this machine, back to back: all_reduce of
# floats (sum), N ranks on one host (default 2), 8 B and 1 KiB .. 64 MiB,
# over one transport (socket or shm), measured as compare.sh measures
# Ringmaster (ringmaster-cli perf, out-of-place rows, each call waited
# for). Each build runs `rounds` times (default 3), the two taking turns
# (the one that goes first alternates), and every figure is the median of
# its rounds. Prints per size both times and after's speed as a multiple
# of before's (before's time over after's: 1.00 is the same, above is
# faster). Both builds' results are checked in one pass before any timed
# run (checked_pass.sh).
#   tests/bench/before_after.sh BEFORE_BUILD AFTER_BUILD [ranks] [socket|shm] [rounds] [small_iters] [iters]
# e.g. the commit before a change, built in a worktree outside the clone:
#   git worktree add /var/cache/ringmaster/before <commit>
#   cmake -S /var/cache/ringmaster/before -B /var/cache/ringmaster/before/build -G Ninja -DCMAKE_BUILD_TYPE=Release
#   cmake --build /var/cache/ringmaster/before/build --target ringmaster-cli
#   tests/bench/before_after.sh /var/cache/ringmaster/before/build build/release 2 shm
set -euo pipefail
before=${1:?before build directory}
after=${2:?after build directory}
np=${3:-2}
transport=${4:-socket}
rounds=${5:-3}
small_iters=${6:-2000}
iters=${7:-20}
case "$transport" in
  socket) export NCCL_SHM_DISABLE=1 ;;
  shm) export NCCL_SHM_DISABLE=0 ;;
  *) echo "before_after.sh: transport must be socket or shm, not '$transport'" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# all_reduce float sum, $np ranks on one host over $transport; $small_iters iterations per size up to 64 KiB," \
  "$iters above; median of $rounds rounds, the builds taking turns"
run() { # build tag round
  local cli=$1/app/ringmaster-cli
  # Rank 0's times, as builds before nccl-tests' -a printed them (later
  # builds average over the ranks by default).
  local rank0=()
  local help
  help=$("$cli" perf --help)  # whole: grep -q would close the pipe on a CLI still writing
  grep -q -- "--average" <<<"$help" && rank0=(-a 0)
  # The small sweep (8 B, then 1 KiB .. 64 KiB) and the large one, as compare.sh.
  "$cli" perf all_reduce --np "$np" -b 8 -e 8 -n "$small_iters" -w 3 --warmup-ms 200 -z 1 -c 0 --no-stages "${rank0[@]}" \
    --json-file "$work/$2.$3.tiny.json" >/dev/null
  "$cli" perf all_reduce --np "$np" -b 1K -e 64K -f 2 -n "$small_iters" -w 3 --warmup-ms 200 -z 1 -c 0 --no-stages "${rank0[@]}" \
    --json-file "$work/$2.$3.small.json" >/dev/null
  "$cli" perf all_reduce --np "$np" -b 128K -e 64M -f 2 -n "$iters" -w 3 --warmup-ms 200 -z 1 -c 0 --no-stages "${rank0[@]}" \
    --json-file "$work/$2.$3.large.json" >/dev/null
}
. "$(dirname "$0")/checked_pass.sh"
checked_pass "$before/app/ringmaster-cli" all_reduce "$np"
checked_pass "$after/app/ringmaster-cli" all_reduce "$np"
for ((round = 0; round < rounds; round++)); do
  if ((round % 2 == 0)); then
    run "$before" before $round
    run "$after" after $round
  else
    run "$after" after $round
    run "$before" before $round
  fi
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def times(tag):
    per_round = []
    for i in range(rounds):
        rows = {}
        for part in ("tiny", "small", "large"):
            for r in json.load(open(f"{work}/{tag}.{i}.{part}.json")):
                rows[r["bytes"]] = r["out_of_place"]["time_us"]
        per_round.append(rows)
    sizes = set.intersection(*(set(r) for r in per_round))
    return {s: statistics.median(r[s] for r in per_round) for s in sizes}
before, after = times("before"), times("after")
print(f"{'size(B)':>10} {'before us':>10} {'after us':>10} {'after/before speed':>19}")
worst = None
for size in sorted(set(before) & set(after)):
    speed = before[size] / after[size] if after[size] > 0 else float('nan')
    worst = speed if worst is None else min(worst, speed)
    print(f"{size:>10} {before[size]:>10.1f} {after[size]:>10.1f} {speed:>19.2f}")
print(f"# slowest size: after runs at {worst:.2f}x before's speed")
PY
