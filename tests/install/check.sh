#!/usr/bin/env bash
# The engine as another program uses it: installs the build's engine
# components into a temporary prefix (cmake --install), then builds a
# program outside the tree against them twice, through the CMake package
# (find_package(Ringmaster)) and through pkg-config, and runs each: a
# 2-rank all_reduce that must find every element right.
#   check.sh BUILD_DIR
set -euo pipefail
build=${1:?build directory}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
for component in engine engine_dev; do
  cmake --install "$build" --prefix "$prefix" --component "$component" >/dev/null
done
config=$(find "$prefix" -name RingmasterConfig.cmake)
pc=$(find "$prefix" -name ringmaster.pc)
[[ -n "$config" && -n "$pc" ]] || { echo "install lacks RingmasterConfig.cmake or ringmaster.pc" >&2; exit 1; }
echo "installed: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. find_package(Ringmaster) and Ringmaster::ringmaster.
cmake -S "$here/consumer" -B "$work/cmake-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-consumer" | tail -n 20
"$work/cmake-consumer/two_rank_all_reduce" "$(free_port)"

# 2. pkg-config, as a Makefile would.
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
echo "pkg-config ringmaster: $(pkg-config --modversion ringmaster): $(pkg-config --cflags --libs ringmaster)"
libdir=$(pkg-config --variable=libdir ringmaster)
# shellcheck disable=SC2046  # pkg-config's flags are words
g++ -O2 -o "$work/pc-consumer" "$here/consumer/two_rank_all_reduce.cpp" $(pkg-config --cflags --libs ringmaster) \
  -Wl,-rpath,"$libdir"
"$work/pc-consumer" "$(free_port)"
echo "install check: passed"
