#!/usr/bin/env bash
# Builds Ringmaster and runs every test: the README's test command and what
# CI runs. Installs what it needs first (scripts/setup-deps).
#
#   ./test.sh                 everything: labels unit, integration, scenario, ui, slow and
#                             portability, then tests/sanitizers.sh (asan, tsan, fuzz)
#   ./test.sh -L unit         extra arguments go to the release ctest, and skip the sanitizers
set -euo pipefail
cd "$(dirname "$0")"

scripts/setup-deps --tests

# The compiler cache lives outside the clone and hashes paths relative to
# it, so a fresh clone elsewhere (as CI makes) still hits it.
if [[ -z "${CCACHE_DIR:-}" ]] && mkdir -p /var/cache/ringmaster/ccache 2>/dev/null && [[ -w /var/cache/ringmaster/ccache ]]; then
  export CCACHE_DIR=/var/cache/ringmaster/ccache
fi
export CCACHE_BASEDIR="$PWD"

# On x86-64 the portability tests (emulated CPUs without AVX-512 and
# without AVX, and the AArch64 cross build) are required, never skipped.
configure_args=()
if [[ "$(uname -m)" == "x86_64" ]]; then
  configure_args+=(-DRINGMASTER_PORTABILITY=ON)
fi
cmake --preset release "${configure_args[@]}"
cmake --build --preset release --parallel "$(nproc)"

# ctest prints its own summary ("N% tests passed, ...") and the label times.
# Then every skipped test with its reason; under CI=1 a skip of a part this
# machine has (root, nftables, libfabric, mpirun, torch, lstopo, ...) fails
# the run (tests/skip_report.py, docs/testing.md).
status=0
junit="$PWD/build/release/ctest-results.xml"
rm -f "$junit"
ctest --preset release --parallel "$(nproc)" --timeout 900 --output-junit "$junit" "$@" || status=$?
strict=()
[[ "${CI:-}" == 1 || "${CI:-}" == true ]] && strict=(--strict)
python3 tests/skip_report.py "$junit" ${strict[@]+"${strict[@]}"} || status=1

# Then the sanitizer and fuzzing stages, each in its own build tree:
# ASan+UBSan over the unit label and the tests of what clients and files
# send, TSan over the collectives' threaded suites, and every libFuzzer
# target for a minute (tests/sanitizers.sh). Arguments narrow the release
# tests above and leave these out.
if [[ $# -eq 0 ]]; then
  tests/sanitizers.sh || status=1
fi
exit "$status"
