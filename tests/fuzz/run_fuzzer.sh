#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS from its seed corpus, in a scratch
# corpus so the checked-in seeds stay as they are. A crash, a sanitizer
# report, a leak, a hang (10 s on one input) or memory past 2 GiB fails
# it; the input that did it is kept in the build tree and named.
#   run_fuzzer.sh FUZZER SEED_DIR SECONDS [libFuzzer options...]
set -euo pipefail
fuzzer=${1:?fuzzer}
seeds=${2:?seed directory}
seconds=${3:?seconds}
shift 3
name=$(basename "$fuzzer")
# Beside the fuzzer binary (the build tree), whatever the directory it runs from.
artifacts="$(cd "$(dirname "$fuzzer")" && pwd)/fuzz-artifacts/$name/"
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(dirname "$0")/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts" "$@" "$work" "$seeds" >"$work/log" 2>&1 || status=$?
grep -aE "^(stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs)" "$work/log" || true
if [ "$status" -ne 0 ]; then
  tail -n 60 "$work/log"
  echo "$name: failed (exit $status); inputs kept in $artifacts" >&2
  exit 1
fi
echo "$name: no crash in $seconds s"
