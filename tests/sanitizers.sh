#!/usr/bin/env bash
# The sanitizer and fuzzing stages of ./test.sh, each in its own build
# tree (docs/security.md, "Fuzzing and sanitizers"):
#   asan  GCC's AddressSanitizer + UndefinedBehaviorSanitizer over the unit
#         label and the integration tests of the agent, the store, the
#         bootstrap and the CLI (what hostile input reaches)
#   tsan  ThreadSanitizer over the collectives test's threaded suites
#   fuzz  clang's libFuzzer targets, each for RINGMASTER_FUZZ_SECONDS (60)
#         from its seed corpus, under ASan + UBSan
#   tests/sanitizers.sh [asan] [tsan] [fuzz]     (default: all three)
# Every stage runs; the exit status is 1 when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(asan tsan fuzz)
jobs=$(nproc)
failed=()

# The integration tests that take what clients and files send; the
# collectives matrices are left to the release build (their time under
# ASan would pass CI's budget).
asan_tests='^(agent_test|agent_preflight_test|agent_faults_test|agent_hardening_test|agent_watch_test|store_test|store_load_test|bootstrap_test|perf_cli_test|topo_cli_test)$'
# The collectives suites that share a communicator between threads: the
# line protocols' flags over shared memory, the waiting, progress and abort
# paths. (Suites that fork ranks cannot run under TSan, which refuses new
# threads after a multi-threaded fork; the full subset takes 4+ minutes.)
# Program and filter, one pair a line.
tsan_runs=(
  "collectives_test Collectives.LineProtocolsOverSharedMemory:Collectives.PointToPointLeavesCollectivesInStep"
  "collective_errors_test CollectiveErrors.ThrowingCollectiveCallbackDoesNotStopCompletion:CollectiveErrors.*Abort*"
  "collective_progress_test CollectiveProgress.*Progress*:CollectiveProgress.*Sleeping*:CollectiveProgress.*Outnumbering*:FlightRecorder.*:StallReport.*"
)

for stage in "${stages[@]}"; do
  echo "== $stage"
  case "$stage" in
    asan)
      cmake --preset asan >/dev/null
      cmake --build --preset asan --parallel "$jobs"
      export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
      export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp}
      export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
      # kernels_isa_symbols checks the release objects: instrumented ones carry ASan's constructors.
      ctest --preset asan --parallel "$jobs" --timeout 900 -L unit -E kernels_isa_symbols || failed+=("asan unit")
      ctest --preset asan --parallel "$jobs" --timeout 900 -R "$asan_tests" || failed+=("asan integration")
      ;;
    tsan)
      cmake --preset tsan >/dev/null
      cmake --build --preset tsan --parallel "$jobs" --target collectives_test collective_errors_test \
        collective_progress_test ringmaster-cli
      for run in "${tsan_runs[@]}"; do
        TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
          "build/tsan/tests/integration/${run%% *}" --gtest_filter="${run#* }" || failed+=("tsan ${run%% *}")
      done
      ;;
    fuzz)
      cmake --preset fuzz >/dev/null
      cmake --build --preset fuzz --parallel "$jobs"
      ctest --preset fuzz --parallel "$jobs" -L fuzz || failed+=("fuzz")
      ;;
    *)
      echo "tests/sanitizers.sh: unknown stage '$stage' (asan, tsan, fuzz)" >&2
      exit 2
      ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "sanitizer stages failed: ${failed[*]}" >&2
  exit 1
fi
echo "sanitizer stages passed: ${stages[*]}"
