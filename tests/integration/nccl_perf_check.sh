#!/usr/bin/env bash
# ringmaster-nccl-perf where this machine allows: with a GPU and NCCL, a
# short checked sweep whose JSON carries NCCL's decisions; without, the
# reason, said once on stdout and in the JSON, and exit 0 (reported as a
# skip). A machine whose nvidia-smi lists a GPU must run it.
#   tests/integration/nccl_perf_check.sh PATH/TO/ringmaster-nccl-perf
set -uo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/out"; exit 1; }

# A collective it does not know is refused, naming it.
"$bin" no_such >"$dir/out" 2>&1 && fail "an unknown collective was taken"
grep -q "no collective 'no_such'" "$dir/out" || fail "the refusal does not name the collective"

"$bin" all_reduce -b 8 -e 1M -f 16 -n 2 -w 1 --json "$dir/run.json" >"$dir/out" 2>&1
rc=$?
if grep -q '^not run: ' "$dir/out"; then
  (( rc == 0 )) || fail "exit $rc when not run"
  grep -q '"ran": false' "$dir/run.json" || fail "the JSON does not say it did not run"
  grep -q '"why": "no ' "$dir/run.json" || fail "the JSON does not say why"
  if nvidia-smi -L >/dev/null 2>&1; then fail "nvidia-smi lists a GPU, yet the sweep did not run"; fi
  echo "SKIPPED: $(head -1 "$dir/out")"
  exit 0
fi
(( rc == 0 )) || fail "exit $rc"
grep -q 'every element checked out' "$dir/out" || fail "elements were wrong"
grep -q '"ran": true' "$dir/run.json" || fail "the JSON does not say it ran"
grep -q '"coll_channels": [1-9]' "$dir/run.json" || fail "NCCL's channel count was not read from its INFO lines"
cat "$dir/out"
