#!/usr/bin/env bash
# Builds Ringmaster and runs every test: the README's test command and what
# CI runs. Installs what it needs first (scripts/setup-deps).
#
#   ./test.sh                 everything (labels unit, integration, scenario, ui, slow)
#   ./test.sh -L unit         extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")"

scripts/setup-deps
cmake --preset release
cmake --build --preset release --parallel "$(nproc)"

# ctest prints its own summary ("N% tests passed, ...") and the label times;
# its exit status is ours.
ctest --preset release --parallel "$(nproc)" --timeout 900 "$@"
