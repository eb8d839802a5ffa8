#!/usr/bin/env bash
# Ringmaster's main job, until the console lands: install what is needed,
# build, then run a local 4-rank all_reduce sweep from 8 B to 64 MiB over
# TCP on loopback, printing rank 0's init stage table and the nccl-tests
# style results table. Extra arguments go to `ringmaster-cli perf`.
set -euo pipefail
cd "$(dirname "$0")"

scripts/setup-deps
cmake --preset release >/dev/null
cmake --build --preset release --parallel "$(nproc)" >/dev/null

exec build/release/app/ringmaster-cli perf all_reduce --np 4 -b 8 -e 64M -f 2 -n 20 -w 5 "$@"
