#!/usr/bin/env bash
# Runs Ringmaster's own binaries on an emulated CPU (Debian's qemu-user) and
# checks what a machine with that CPU would see:
#
#   1. the kernels unit test at the CPU's default level, which must be the
#      best level it supports (the last of --levels);
#   2. the type x op matrix with each supported level forced, every case
#      run (none skipped);
#   3. a level the CPU lacks, forced, is refused with a configuration error
#      naming it, before anything runs;
#   4. `ringmaster-cli perf all_reduce --np 2 -c 1` over shared memory
#      reports 0 wrong values.
#
#   emulated_cpu.sh QEMU CPU_MODEL "LEVELS" LACKING KERNELS_TEST CLI
#
# Sizes are small: emulation runs a hundred times slower than the host.
set -uo pipefail

if (($# != 6)); then
  echo "usage: $0 QEMU CPU_MODEL \"LEVELS\" LACKING KERNELS_TEST CLI" >&2
  exit 2
fi
qemu=$1 model=$2 levels=$3 lacking=$4 kernels_test=$5 cli=$6
read -r -a level_list <<<"$levels"
best=${level_list[-1]}

for f in "$qemu" "$kernels_test" "$cli"; do
  [[ -x "$f" ]] || { echo "FAIL: $f is missing or not executable" >&2; exit 1; }
done

failures=0
fail() {
  echo "FAIL [$model]: $*" >&2
  failures=$((failures + 1))
}
# Runs one program on the emulated CPU with its output in $log. qemu warns
# about each CPUID feature TCG cannot emulate; those lines say nothing
# about Ringmaster and are dropped (after the program has ended, so the
# checks below read everything it wrote).
emulate() {
  local rc=0
  "$qemu" -cpu "$model" "$@" >"$log" 2>&1 || rc=$?
  sed -i "/TCG doesn't support requested feature/d" "$log"
  return "$rc"
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

export RINGMASTER_TEST_LARGE_COUNT=65539 RINGMASTER_STREAMING_STORE_BYTES=4096
unset RINGMASTER_CPU_KERNEL

echo "== $model: kernels test at the default level (expected: $best)"
if ! NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT emulate "$kernels_test" --gtest_filter='-AllTypesAndOps/*:GpuTypesAndOps/*:GpuAvg.*'; then
  cat "$log"
  fail "kernels_test failed at the default level"
elif ! grep -q "CPU reduction kernels: $best (best level" "$log"; then
  grep 'CPU reduction kernels' "$log" || cat "$log"
  fail "the default level is not $best"
else
  grep -m1 'CPU reduction kernels' "$log"
  grep -E '^\[  PASSED  \]' "$log"
fi

for level in "${level_list[@]}"; do
  echo "== $model: every type x op at level $level"
  if ! RINGMASTER_CPU_KERNEL=$level emulate "$kernels_test" --gtest_filter='AllTypesAndOps/*'; then
    tail -n 40 "$log"
    fail "the $level matrix failed"
  elif grep -q '\[  SKIPPED \]' "$log"; then
    grep '\[  SKIPPED \]' "$log" | head -n 3
    fail "the $level matrix skipped tests on a CPU that has $level"
  else
    grep -E '^\[  PASSED  \]' "$log"
  fi
done

echo "== $model: forcing $lacking, which this CPU lacks"
if RINGMASTER_CPU_KERNEL=$lacking emulate "$cli" perf all_reduce --np 2 -c 1 -b 8 -e 8 -n 1 -w 0; then
  cat "$log"
  fail "RINGMASTER_CPU_KERNEL=$lacking was accepted"
elif ! grep -q "config error: RINGMASTER_CPU_KERNEL=$lacking is not supported by this CPU" "$log"; then
  cat "$log"
  fail "RINGMASTER_CPU_KERNEL=$lacking failed without the configuration error"
else
  grep -m1 "RINGMASTER_CPU_KERNEL=$lacking" "$log"
fi

echo "== $model: perf all_reduce --np 2 -c 1 over shared memory"
if ! NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET emulate "$cli" perf all_reduce --np 2 -c 1 -b 8 -e 1M -f 8 -n 2 -w 1; then
  tail -n 40 "$log"
  fail "perf all_reduce failed"
elif ! grep -q '# Out of bounds values : 0 OK' "$log"; then
  tail -n 40 "$log"
  fail "perf all_reduce reported wrong values"
elif ! grep -q ' via SHM' "$log" || grep -q ' via SOCKET' "$log"; then
  grep -E ' via ' "$log" | head -n 5
  fail "the ranks did not connect over shared memory alone"
else
  grep -E '^ +[0-9]+ ' "$log" | head -n 4
  grep '# Out of bounds values' "$log"
fi

if ((failures > 0)); then
  echo "$failures check(s) failed on the emulated $model CPU" >&2
  exit 1
fi
echo "all checks passed on the emulated $model CPU"
