#!/usr/bin/env bash
# Builds Ringmaster and runs every test: the README's test command and what
# CI runs. Installs what it needs first (scripts/setup-deps).
#
#   ./test.sh                 everything (labels unit, integration, scenario, ui, slow, portability)
#   ./test.sh -L unit         extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")"

scripts/setup-deps

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

# ctest prints its own summary ("N% tests passed, ...") and the label times;
# its exit status is ours.
ctest --preset release --parallel "$(nproc)" --timeout 900 "$@"
